"""`kubectl gpu doctor`, a pod that ran out of GPU memory: what its node's GPUs hold now.

Owns this read and its cost: nothing at all unless the pod's termination message or log
tails show a CUDA out-of-memory (doctor.neighbours decides that); then one `kubectl gpu top
node/NODE` read (workflows.top: the node's kubectl-gpu agent through the API server's pod
proxy, or dcgm-exporter), within DEADLINE. Turns its rows into doctor.neighbours' plain
facts: the GPUs the pod holds, its isolation there, and the other pods and processes with
their memory. A read that fails (no agent, no `pods/proxy` permission, no answer) becomes
the reason the figures are missing, never a failed diagnosis. Must not decide.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from kubectl_gpu import cluster, errors
from kubectl_gpu.doctor import neighbours
from kubectl_gpu.doctor.containerlogs import ContainerLog
from kubectl_gpu.doctor.facts import Pod
from kubectl_gpu.doctor.neighbours import GpuShare, Holder, OutOfMemory
from kubectl_gpu.usage import view
from kubectl_gpu.usage.view import TopRow
from kubectl_gpu.workflows import top

log = logging.getLogger(__name__)
DEADLINE = 5.0  # seconds: the node's answer is worth waiting for, not as long as top's 10 s


def gather(api: cluster.Api, pod: Pod, logs: Sequence[ContainerLog]) -> OutOfMemory | None:
    """The pod's out-of-memory and its node's GPUs now; None when it ran out of none."""
    line = neighbours.evidence(pod, logs)
    if line is None:
        return None
    if not pod.node:
        return OutOfMemory(line, unread="the pod has no node")
    try:
        reading = top.read(api, top.Scope(node=pod.node), top.Options(deadline=DEADLINE))
    except errors.GpuError as e:
        if isinstance(e, errors.ClusterError) and e.status is None:
            raise  # the API server is gone: nothing else would work either
        log.info("GPU figures of node %s not read: %s", pod.node, e.message)
        return OutOfMemory(line, unread=e.message)
    if pod.node in reading.failed:
        return OutOfMemory(line, unread=reading.failed[pod.node])
    if not reading.per_process:
        return OutOfMemory(
            line, unread="dcgm-exporter gives only each GPU's figures, not each pod's"
        )
    return _shares(line, pod, reading.rows)


def _shares(line: str, pod: Pod, rows: Sequence[TopRow]) -> OutOfMemory:
    """The GPUs the pod holds (every GPU of the node when it holds none now: a pod that
    ended gave its devices back) and who else is on each."""
    me = (pod.namespace, pod.name)
    mine = [r for r in rows if r.kind == view.POD and (r.namespace, r.pod) == me]
    held = bool(mine)
    uuids = list(dict.fromkeys(r.gpu_uuid for r in (mine or rows)))
    return OutOfMemory(line, tuple(_share(u, rows, mine) for u in uuids), held=held)


def _share(uuid: str, rows: Sequence[TopRow], mine: Sequence[TopRow]) -> GpuShare:
    on_gpu = [r for r in rows if r.gpu_uuid == uuid]
    gpu = next((r for r in on_gpu if r.kind == view.GPU), None)
    own = [r for r in mine if r.gpu_uuid == uuid]
    others: dict[str, int] = {}
    for r in on_gpu:
        if r.kind == view.GPU or any(r is m for m in own):
            continue
        ref = r.pod_ref if r.kind == view.POD else f"<no pod> pid {r.pids[0] if r.pids else '?'}"
        others[str(ref)] = others.get(str(ref), 0) + (r.memory_used or 0)
    # the pod's own isolation; with no row of its own, the one its neighbours have
    limits = [r.limit for r in (own or on_gpu) if r.limit is not None]
    return GpuShare(
        index=gpu.gpu_index if gpu else None,
        uuid=uuid,
        total=gpu.memory_total if gpu else None,
        used=gpu.memory_used if gpu else None,
        isolation=limits[0].form if limits else "",
        cap=limits[0].memory if limits else None,
        own=sum(r.memory_used or 0 for r in own),
        others=tuple(
            Holder(ref, memory)
            for ref, memory in sorted(others.items(), key=lambda o: -o[1])
            if memory > 0
        ),
    )
