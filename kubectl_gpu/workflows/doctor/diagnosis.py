"""`kubectl gpu doctor`: gather the facts for one pod, or for the cluster, and diagnose them.

Owns the reads: the pod (or, when it does not exist, the namespace's FailedCreate events),
its events (the latest MAX_EVENTS), its node with the GPUs the pods there hold (field
selectors `spec.nodeName` and `status.phase`: no list of every pod for a pod on a node; every
node and the pods that hold resources for one waiting for a node, and for the cluster), the
namespace's ResourceQuotas, the device plugin's pod on the pod's node (through deployment
detection; where there is none, why its DaemonSet runs none there, through
`workflows.comeback`), the tails of the container logs doctor.containerlogs asks for
(LOG_LINES lines, LOG_BYTES bytes each), and for the cluster view the sharing survey of
`share show`. A read the user may not do (403) or a resource the cluster lacks (404) leaves
that fact out rather than failing the diagnosis; so does any refused log read. Must not
decide anything: kubectl_gpu.doctor does.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from kubectl_gpu import cluster, doctor, errors
from kubectl_gpu.doctor import admission, containerlogs, facts
from kubectl_gpu.keys import API_VERSION as API_VERSION  # one definition, in keys
from kubectl_gpu.mig import actuators, stuck
from kubectl_gpu.sharing import deployment as deployments
from kubectl_gpu.sharing.rollout.status import NodeStatus as PluginNodeStatus
from kubectl_gpu.sharing.rollout.status import PluginPod
from kubectl_gpu.workflows import comeback
from kubectl_gpu.workflows.doctor import dra, neighbours
from kubectl_gpu.workflows.share import state as sharestate

T = TypeVar("T")
log = logging.getLogger(__name__)
Json = dict[str, Any]
MAX_EVENTS = 50
LOG_LINES = 50
LOG_BYTES = 64 * 1024
SHORT_FIX = 200  # characters: a longer fix goes to the evidence, read with -o wide


@dataclasses.dataclass(frozen=True)
class Result:
    """What doctor concluded, and about what (a pod, or the cluster)."""

    kind: str  # Pod | Cluster
    namespace: str
    name: str
    diagnoses: tuple[doctor.Diagnosis, ...]

    @property
    def failed(self) -> bool:
        return doctor.has_errors(self.diagnoses)

    def document(self) -> dict[str, Any]:
        """As schemas/doctor-result.v1.json describes it."""
        count = {s: sum(d.severity == s for d in self.diagnoses) for s in ("error", "warning")}
        return {
            "apiVersion": API_VERSION,
            "kind": "DoctorResult",
            "target": {"kind": self.kind, "namespace": self.namespace, "name": self.name},
            "healthy": not self.failed,
            "summary": {"errors": count["error"], "warnings": count["warning"]},
            "diagnoses": [d.to_dict() for d in self.diagnoses],
        }


def pod(api: cluster.Api, namespace: str, name: str) -> Result:
    """Diagnose one pod."""
    try:
        raw = api.get(cluster.path("pods", name, namespace))
    except errors.ClusterError as e:
        if e.status != 404:
            raise
        found = admission.missing_pod(
            namespace, name, _events(api, namespace), _quotas(api, namespace)
        )
        return Result("Pod", namespace, name, tuple(found))
    uid = str((raw.get("metadata") or {}).get("uid") or "")
    subject = facts.pod_from_dict(raw)
    case_nodes = _own_node(api, subject.node) if subject.node else _nodes(api)
    logs = _logs(api, subject)
    case = doctor.PodCase(
        pod=subject,
        events=_events(api, namespace, name, uid),
        nodes=case_nodes,
        quotas=_quotas(api, namespace),
        plugin=_plugin(api, str((raw.get("spec") or {}).get("nodeName") or "")),
        logs=logs,
        survey=() if subject.node else _survey(api),
        stuck=_stuck(api, case_nodes, subject.node),
        dra=dra.gather(api, raw),
        oom=neighbours.gather(api, subject, logs),
    )
    return Result("Pod", namespace, name, doctor.diagnose_pod(case))


def cluster_health(api: cluster.Api) -> Result:
    """Diagnose every GPU node (and the GPU pods' placement choices)."""
    from kubectl_gpu.workflows.share.options import Options
    from kubectl_gpu.workflows.share.show import show

    pods = _pods(api)
    nodes = _nodes(api, pods)
    survey = None
    elsewhere: dict[str, PluginPod] = {}
    blocked: dict[str, tuple[str, str]] = {}
    found: list[doctor.Diagnosis] = []
    try:
        status = show(api, Options())
    except deployments.DeploymentError as e:
        if _all_plugins_off(nodes):  # DRA serves every GPU node: no device plugin is wanted
            log.info("device plugin not checked: %s", e.message)
        else:
            found.append(_no_plugin(e))
    else:
        survey = status.nodes
        elsewhere = _plugins_off(api, status.deployment, {n.name for n in nodes if n.is_gpu_node})
        missing = [row.node for row in survey if not row.plugin_pod]
        blocked = _blocked(api, status.deployment, missing)
    found += doctor.health.check(
        nodes, pods, survey, elsewhere=elsewhere, stuck=_stuck(api, nodes), blocked=blocked
    )
    return Result("Cluster", "", "", doctor.ordered(found))


def _all_plugins_off(nodes: Sequence[facts.Node]) -> bool:
    gpu_nodes = [n for n in nodes if n.is_gpu_node]
    return bool(gpu_nodes) and all(n.device_plugin_off for n in gpu_nodes)


def _no_plugin(e: deployments.DeploymentError) -> doctor.Diagnosis:
    fix = e.hint if len(e.hint) <= SHORT_FIX else "follow the steps in the evidence (-o wide)"
    evidence = (e.hint,) if e.hint else ()
    return doctor.Diagnosis(
        "kubelet", "error", "daemonset/nvidia-device-plugin", e.message, evidence, fix
    )


def _survey(api: cluster.Api) -> tuple[PluginNodeStatus, ...]:
    """The device plugin on each GPU node (empty when none is found or it may not be read)."""
    from kubectl_gpu.workflows.share.options import Options
    from kubectl_gpu.workflows.share.show import show

    try:
        return show(api, Options()).nodes
    except deployments.DeploymentError as e:
        log.info("device plugin not checked: %s", e.message)
    except errors.ClusterError as e:
        if e.status not in (403, 404):
            raise
        log.warning("device plugin left out of the diagnosis: %s", e.message)
    return ()


def _stuck(
    api: cluster.Api, nodes: Iterable[facts.Node], only: str = ""
) -> dict[str, tuple[str, ...]]:
    """Why each GPU node's MIG change is stuck (nodes that are not left out); `only`: only
    that node's agent report is read."""
    from kubectl_gpu.workflows.mig import nodemig

    reported = nodemig.reported_gpus(api, only)
    policies = _optional(lambda: api.list(cluster.path("clusterpolicies")))
    now = dt.datetime.now(dt.timezone.utc)
    found = {}
    for node in (n for n in nodes if n.is_gpu_node):
        actuator = actuators.choose(policies, node.labels)
        seen = stuck.NodeMig(node.name, node.labels, node.annotations, reported.get(node.name))
        subject = nodemig.with_actuator(api, seen, actuator)
        reasons = stuck.reasons(subject, now)
        if reasons:
            found[node.name] = reasons
    return found


def _plugins_off(
    api: cluster.Api, deployment: deployments.Deployment, gpu_nodes: set[str]
) -> dict[str, PluginPod]:
    """The plugin's pods on nodes without GPUs, by node."""
    pods = _optional(lambda: sharestate.plugin_pods(api, deployment).values())
    by_node = {str((p.get("spec") or {}).get("nodeName") or ""): p for p in pods}
    return {
        node: PluginPod.from_dict(pod, deployment.container)
        for node, pod in by_node.items()
        if node not in gpu_nodes
    }


def _events(
    api: cluster.Api, namespace: str, name: str = "", uid: str = ""
) -> tuple[facts.Event, ...]:
    selector = f"involvedObject.name={name}" if name else ""
    raw = _optional(
        lambda: api.list(cluster.path("events", namespace=namespace), field_selector=selector)
    )
    mine = [
        e for e in raw if not uid or (e.get("involvedObject") or {}).get("uid") in (uid, None, "")
    ]
    mine.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    return tuple(facts.event_from_dict(e) for e in mine[-MAX_EVENTS:])


def _pods(api: cluster.Api, node: str = "", *, bound: bool = False) -> list[facts.Pod]:
    """The pods that have not ended (what doctor counts), the server leaving out the others
    (field selectors); `node`: only that node's; `bound`: only those on some node. Each is
    kept as the facts doctor reads as its page arrives: 40,000 pods held whole as JSON took
    961 MiB (docs/performance.md)."""
    field = f"spec.nodeName={node}," if node else ("spec.nodeName!=," if bound else "")
    field += "status.phase!=Succeeded,status.phase!=Failed"
    return _optional(
        lambda: map(facts.pod_from_dict, api.list(cluster.path("pods"), field_selector=field))
    )


def _nodes(api: cluster.Api, pods: list[facts.Pod] | None = None) -> tuple[facts.Node, ...]:
    """Every node, with the GPUs its pods hold (for a pod no node was chosen for yet)."""
    used = facts.gpu_usage(_pods(api, bound=True) if pods is None else pods)
    raw = _optional(lambda: api.list(cluster.path("nodes")))
    return tuple(facts.node_from_dict(n, used.get(str(n["metadata"]["name"]))) for n in _named(raw))


def _own_node(api: cluster.Api, name: str) -> tuple[facts.Node, ...]:
    """The pod's own node (none when it is gone or may not be read), with the GPUs its pods
    hold: a GET and a LIST by `spec.nodeName`, the same few requests on any cluster size."""
    raw = _optional(lambda: [api.get(cluster.path("nodes", name))])
    used = facts.gpu_usage(_pods(api, name))
    return tuple(facts.node_from_dict(n, used.get(name)) for n in _named(raw))


def _quotas(api: cluster.Api, namespace: str) -> tuple[facts.Quota, ...]:
    raw = _optional(lambda: api.list(cluster.path("resourcequotas", namespace=namespace)))
    return tuple(facts.quota_from_dict(q) for q in raw)


def _logs(api: cluster.Api, pod: facts.Pod) -> tuple[containerlogs.ContainerLog, ...]:
    """The log tails doctor asks for; a refused read is left out, never fatal."""
    read = []
    for want in containerlogs.wanted(pod):
        tail = cluster.LogTail(LOG_LINES, LOG_BYTES, want.previous)
        try:
            text = api.logs(pod.namespace, pod.name, want.container, tail)
        except errors.ClusterError as e:
            if e.status is None:
                raise  # the API server is gone: nothing else would work either
            if e.status in (403, 404):
                log.warning("container logs left out of the diagnosis: %s", e.message)
                break  # the same answer awaits every other container
            log.info("log of container %s not read: %s", want.container, e.message)
            continue
        read.append(containerlogs.ContainerLog(want.container, want.previous, text))
    return tuple(read)


def _plugin(api: cluster.Api, node: str) -> doctor.PluginOnNode:
    """The device plugin's pod on `node`; unknown when no node or no plugin is detected."""
    if not node:
        return doctor.PluginOnNode(known=False, pod=None)
    policies = _optional(lambda: api.list(cluster.path("clusterpolicies")))
    daemonsets = _optional(lambda: api.list(cluster.path("daemonsets")))
    try:
        found = deployments.detect(policies, daemonsets, reading=True)
    except deployments.DeploymentError as e:
        log.info("device plugin not checked: %s", e.message)
        return doctor.PluginOnNode(known=False, pod=None)
    pods = _optional(lambda: sharestate.plugin_pods(api, found, node).values())
    raw = next(iter(pods), None)
    blocked = {} if raw else _blocked(api, found, [node])
    return doctor.PluginOnNode(
        known=True,
        pod=PluginPod.from_dict(raw, found.container) if raw else None,
        namespace=found.namespace,
        container=found.container,
        selector=found.selector,
        blocked=blocked.get(node, ("", ""))[0],
        fix=blocked.get(node, ("", ""))[1],
    )


def _blocked(
    api: cluster.Api, deployment: deployments.Deployment, nodes: Iterable[str]
) -> dict[str, tuple[str, str]]:
    """Why the plugin's DaemonSet runs no pod on each of `nodes` (an untolerated taint, a
    selector it misses) and what to do, by node; nodes with no such reason are left out."""
    names = list(nodes)
    if not names:
        return {}
    raw = _optional(lambda: comeback.raw_nodes(api, names))
    plugin = [d for d in comeback.stack(api, deployment) if d.role == comeback.PLUGIN]
    found: dict[str, tuple[str, str]] = {}
    for blocker in comeback.blockers(plugin, raw, settled=False):
        found.setdefault(blocker.node, (blocker.reason(), blocker.fix()))
    return found


def _optional(read: Callable[[], Iterable[T]]) -> list[T]:
    """A read whose answer doctor can do without: 403 and 404 leave the fact out."""
    try:
        return list(read())
    except errors.ClusterError as e:
        if e.status == 404:  # not served here (a CRD that is not installed): nothing to see
            return []
        if e.status != 403:
            raise
        log.warning("left out of the diagnosis: %s", e.message)
        return []


def _named(items: Iterable[Json]) -> list[Json]:
    return [i for i in items if (i.get("metadata") or {}).get("name")]
