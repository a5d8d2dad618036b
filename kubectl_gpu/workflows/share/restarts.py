"""Restarting the device plugin on the nodes a sharing change reaches, a few at a time.

Owns the rolling restart: for each batch of at most `max_unavailable` nodes, delete the plugin
pod found by the DaemonSet's selector, `spec.nodeName` and the plugin container (GFD and MPS
pods share the labels of NVIDIA's Helm chart, deployments/helm/nvidia-device-plugin in
github.com/NVIDIA/k8s-device-plugin; they are restarted beside it, unwaited),
then wait for the DaemonSet's new pod to be Running and Ready, and to stay so for `STEADY_S`
with no container restart (a DaemonSet's minReadySeconds); each batch says on stderr which it
is of how many, how many nodes are done and what it waits for. A new pod that crash-loops, or
one not Ready by the timeout, ends the rollout: later nodes are not touched.

Within a batch the deletes run side by side (at most `PARALLEL` at a time; the cluster port
honours 429 Retry-After), and each look at the batch is one request: a LIST by `spec.nodeName`
for a batch of one node, else one LIST of the DaemonSet's pods by its selector, however many
nodes wait. Before, each node took its own LISTs and delete one after another, and each look
listed once per waiting node: a 500-node batch spent most of its time in those requests.
Must not decide which nodes to restart (the plan does).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

from kubectl_gpu import cluster, errors
from kubectl_gpu.sharing import rollout
from kubectl_gpu.sharing.deployment import Deployment
from kubectl_gpu.workflows.progress import Batches
from kubectl_gpu.workflows.share import state as sharestate
from kubectl_gpu.workflows.waiting import Deadline, Timing

log = logging.getLogger(__name__)
WAITED_FOR = "a new device plugin pod to be Running and Ready"
# The plugin has no readiness probe, so kubelet calls it Ready the moment it starts, and one
# that rejects its new config exits a second or so later: a single Ready look proves nothing.
STEADY_S = 3.0
PARALLEL = 16  # deletes in flight at once within a batch: bounded, so a large batch
# does not open hundreds of connections to the API server at the same moment


@dataclasses.dataclass(frozen=True)
class Restart:
    """How one node's plugin restart went."""

    node: str
    pod: str  # the new plugin pod ("" when none came)
    outcome: str  # restarted | failed | skipped
    seconds: float = 0.0
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome == "restarted"


def roll(
    api: cluster.Api,
    deployment: Deployment,
    nodes: Sequence[str],
    batch: tuple[int, float],
    timing: Timing,
) -> Iterator[Restart]:
    """Restart the plugin on `nodes`; `batch` is (max unavailable, seconds for all batches).

    Yields each batch's restarts as the batch ends, so that a caller interrupted mid-way
    (Ctrl-C, an API failure) can say which nodes were restarted.
    """
    size, overall = max(1, batch[0]), timing.deadline(batch[1])
    progress = Batches(len(nodes), size, timing)
    for start in range(0, len(nodes), size):
        group = nodes[start : start + size]
        left = max(0.0, overall.end - timing.clock())  # --timeout bounds the whole rollout
        progress.begin("restarting the device plugin", group)
        ended = _restart_group(api, deployment, group, timing.deadline(left), progress)
        progress.end(sum(r.ok for r in ended))
        yield from ended
        if not all(r.ok for r in ended):
            failed = ", ".join(r.node for r in ended if not r.ok)
            for n in nodes[start + size :]:
                yield Restart(
                    n, "", "skipped", message=f"not restarted: stopped after {failed} failed"
                )
            return


def _restart_group(
    api: cluster.Api,
    deployment: Deployment,
    nodes: Sequence[str],
    deadline: Deadline,
    progress: Batches,
) -> list[Restart]:
    current = _plugin_pods(api, deployment, nodes)
    doomed = list(_companions(api, deployment, nodes))
    old: dict[str, str] = {}
    for node in nodes:
        pod = current.get(node)
        if pod is None:
            # The DaemonSet may be replacing it (the GPU Operator re-renders it after a
            # ClusterPolicy change): any plugin pod that comes up now has the new config.
            log.info("no device plugin pod on %s right now; waiting for one", node)
            old[node] = ""
            continue
        old[node] = str(pod["metadata"].get("uid", ""))
        log.info("restarting the device plugin on %s (pod %s)", node, pod["metadata"]["name"])
        doomed.append(pod)
    _delete_all(api, doomed)
    results = _await_new_pods(api, deployment, old, deadline, progress)
    return [results[n] for n in nodes]


def _plugin_pods(
    api: cluster.Api, deployment: Deployment, nodes: Sequence[str]
) -> dict[str, sharestate.Json]:
    """The plugin pod on each of `nodes`, in one request."""
    if len(nodes) == 1:
        return sharestate.plugin_pods(api, deployment, nodes[0])
    wanted = set(nodes)
    return {n: p for n, p in sharestate.plugin_pods(api, deployment).items() if n in wanted}


def _companions(
    api: cluster.Api, deployment: Deployment, nodes: Sequence[str]
) -> Iterator[sharestate.Json]:
    if len(nodes) == 1:
        yield from sharestate.companion_pods(api, deployment, nodes[0])
        return
    wanted = set(nodes)
    for pod in sharestate.companion_pods(api, deployment):
        if str((pod.get("spec") or {}).get("nodeName") or "") in wanted:
            yield pod


def _delete_all(api: cluster.Api, pods: Sequence[sharestate.Json]) -> None:
    """Delete `pods` side by side; the first failure is raised once all have been tried."""
    if len(pods) <= 1:
        for pod in pods:
            _delete(api, pod)
        return
    with ThreadPoolExecutor(max_workers=min(PARALLEL, len(pods))) as pool:
        outcomes = list(pool.map(lambda pod: _attempt(api, pod), pods))
    failure = next((e for e in outcomes if e is not None), None)
    if failure is not None:
        raise failure


def _attempt(api: cluster.Api, pod: sharestate.Json) -> errors.ClusterError | None:
    try:
        _delete(api, pod)
    except errors.ClusterError as e:
        return e
    return None


def _await_new_pods(
    api: cluster.Api,
    deployment: Deployment,
    old: dict[str, str],
    deadline: Deadline,
    progress: Batches,
) -> dict[str, Restart]:
    results: dict[str, Restart] = {}
    last: dict[str, rollout.PluginPod] = {}
    ready: dict[str, tuple[float, int]] = {}  # node: when first seen Ready, its restarts then
    while True:
        waiting = sorted(set(old) - set(results))
        progress.waiting(WAITED_FOR, waiting)
        found = _plugin_pods(api, deployment, waiting)
        for node in waiting:
            pod = found.get(node)
            if pod is None or str(pod["metadata"].get("uid", "")) == old[node]:
                continue
            state = rollout.PluginPod.from_dict(pod, deployment.container)
            last[node] = state
            verdict = _verdict(node, state, deadline, ready)
            if verdict is not None:
                results[node] = verdict
        if len(results) == len(old) or deadline.passed:
            break
        deadline.pause()
    for node in set(old) - set(results):
        seen = last.get(node)
        status = f" (last seen {seen.name}: {seen.status})" if seen else " (no new pod appeared)"
        message = (
            f"the plugin did not become Ready within {deadline.end - deadline.start:g}s{status}"
        )
        results[node] = Restart(
            node, seen.name if seen else "", "failed", deadline.elapsed(), message
        )
    return results


def _verdict(
    node: str, state: rollout.PluginPod, deadline: Deadline, ready: dict[str, tuple[float, int]]
) -> Restart | None:
    """restarted once Ready for `STEADY_S` (or until the deadline) with no restart between;
    failed when crash-looping; None while it is too early to say."""
    now = deadline.timing.clock()
    if state.running:
        since, restarts = ready.setdefault(node, (now, state.restarts))
        if state.restarts != restarts:  # it crashed and came back between two looks
            ready[node] = (now, state.restarts)
            return None
        if now - since < STEADY_S and not deadline.passed:
            return None
        log.info("the device plugin on %s is back (%s)", node, state.name)
        return Restart(node, state.name, "restarted", deadline.elapsed())
    ready.pop(node, None)
    if state.crash_looping:
        detail = f": {state.message}" if state.message else ""
        message = f"plugin pod {state.name} is {state.status} ({state.restarts} restarts){detail}"
        return Restart(node, state.name, "failed", deadline.elapsed(), message)
    return None


def _delete(api: cluster.Api, pod: sharestate.Json) -> None:
    meta = pod["metadata"]
    try:
        api.delete(cluster.path("pods", meta["name"], meta["namespace"]))
    except errors.ClusterError as e:
        if e.status != 404:  # already gone: the DaemonSet replaces it all the same
            raise
