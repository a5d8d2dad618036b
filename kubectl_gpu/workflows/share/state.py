"""Reading what a sharing change is planned from: deployment, ConfigMap, GPU nodes, plugin pods.

Owns the reads behind `kubectl gpu share`: ClusterPolicies (none when the CRD is not
installed), DaemonSets, the plugin's ConfigMap with every key parsed and validated, every GPU
node (with the whole GPUs its agent's report counts), the plugin pod per node and the
replicas pods hold. Returns the domain's frozen
`ClusterState` plus the raw objects later writes need (resourceVersion preconditions, client
dry-run output). Must not decide or write anything.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kubectl_gpu import cluster, documents, errors, findings, keys, validation
from kubectl_gpu.doctor import facts
from kubectl_gpu.gpumap import report
from kubectl_gpu.gpumap.report import NodeReport
from kubectl_gpu.sharing import deployment as deployments
from kubectl_gpu.sharing import rollout
from kubectl_gpu.sharing.deployment import Deployment, Overrides
from kubectl_gpu.workflows import agentreports
from kubectl_gpu.workflows.policies import cluster_policies

log = logging.getLogger(__name__)
Json = dict[str, Any]
DEVICE_PLUGIN_CONFIG = "device-plugin-config"


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """The planner's input and the raw objects it was read from."""

    state: rollout.ClusterState
    configmap: Json | None  # as read; None when it does not exist
    cluster_policy: Json | None
    nodes: Mapping[str, Json]  # every GPU node, raw, by name
    listed: Sequence[Json] = ()  # every node as read (GPU or not), for the preview
    reports: Mapping[str, NodeReport] = dataclasses.field(default_factory=dict)  # by node


def read(api: cluster.Api, overrides: Overrides, *, reading: bool = False) -> Snapshot:
    """Read the device plugin's deployment, its ConfigMap and every GPU node (`reading`: to
    show them, so a plugin that takes no config is read as it runs)."""
    policies = cluster_policies(api)
    daemonsets = list(api.list(cluster.path("daemonsets", namespace=overrides.namespace)))
    deployment = deployments.detect(policies, daemonsets, overrides, reading=reading)
    raw_configmap = None
    if deployment.configurable:
        raw_configmap = _get_or_none(
            api, cluster.path("configmaps", deployment.configmap, deployment.namespace)
        )
    listed = list(api.list(cluster.path("nodes")))
    nodes = {
        str(n["metadata"]["name"]): n
        for n in listed
        if rollout.is_gpu_node(n) and not _plugin_off(n)
    }
    reports = agentreports.read_all(api)
    counted = _whole_gpus(reports)
    state = rollout.ClusterState(
        deployment=deployment,
        configmap=configmap_state(deployment, raw_configmap),
        nodes=tuple(
            rollout.GpuNode.from_dict(nodes[name], counted.get(name)) for name in sorted(nodes)
        ),
    )
    policy = next((p for p in policies if _name(p) == deployment.cluster_policy), None)
    return Snapshot(state, raw_configmap, policy, nodes, listed, reports)


def _plugin_off(node: Json) -> bool:
    """Labelled to run no device plugin (the GPU Operator's convention, which NVIDIA's DRA docs
    ask for on DRA nodes): a device-plugin config does not reach it, so sharing leaves it be."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    return labels.get(keys.DEPLOY_DEVICE_PLUGIN_LABEL) == "false"


def _whole_gpus(reports: Mapping[str, NodeReport]) -> dict[str, int]:
    """Per node, the whole (non-MIG) GPUs its agent's GPUNodeReport lists: the physical count
    where GFD labels none (the bundle runs no GFD), so that a node still running an older
    config is told by its capacity. None when no agent is installed (404) or the user may
    not read reports (403)."""
    return {
        node: sum(g.mig_mode != report.MIG_ENABLED for g in node_report.gpus)
        for node, node_report in reports.items()
    }


def configmap_state(deployment: Deployment, raw: Json | None) -> rollout.ConfigMapState:
    """The ConfigMap with each key parsed (unreadable keys left out of `docs`) and checked."""
    if raw is None:
        return rollout.ConfigMapState(deployment.namespace, deployment.configmap)
    texts = {str(k): str(v) for k, v in (raw.get("data") or {}).items()}
    docs: dict[str, rollout.Doc] = {}
    problems: dict[str, str] = {}
    for key, text in texts.items():
        where = f"{deployment.namespace}/{deployment.configmap}:{key}"
        checked = validation.check(text, where, DEVICE_PLUGIN_CONFIG)  # read once, checked
        if checked.readable:  # else left out of `docs`: the planner refuses to build on it
            docs[key] = checked.data
        rejection = checked.rejection
        if rejection is not None:
            problems[key] = rejection.message  # a row has its own fix: the hint stays off
    annotations = (raw.get("metadata") or {}).get("annotations") or {}
    return rollout.ConfigMapState(
        namespace=deployment.namespace,
        name=deployment.configmap,
        exists=True,
        texts=texts,
        docs=docs,
        record=str(annotations.get(keys.PREVIOUS_CONFIG_ANNOTATION, "")),
        problems=problems,
    )


def parse(text: str, where: str) -> dict[str, Any] | None:
    """A config's plain data (None: an empty file); ValueError when it is not one YAML mapping."""
    loaded, found = documents.load_documents(text, where)
    if findings.has_errors(found) or len(loaded) > 1:
        raise ValueError(f"{where} is not one readable YAML document")
    data = loaded[0].data if loaded else None
    if data is not None and not isinstance(data, dict):
        raise ValueError(f"{where} is not a mapping")
    return data


def node_names(api: cluster.Api, names: Sequence[str], selector: str) -> tuple[str, ...]:
    """The nodes `--node`/`-l` name, checked to exist; UsageError for unknown ones."""
    if selector:
        found = [
            str(n["metadata"]["name"])
            for n in api.list(cluster.path("nodes"), label_selector=selector)
        ]
        if not found:
            raise errors.UsageError(f"no node matches -l {selector}")
        return tuple(sorted(found))
    known = {str(n["metadata"]["name"]) for n in api.list(cluster.path("nodes"))}
    unknown = sorted(set(names) - known)
    if unknown:
        raise errors.UsageError(
            f"node(s) not found: {', '.join(unknown)}",
            hint="list them with `kubectl get nodes`",
        )
    return tuple(sorted(set(names)))


def plugin_pods(
    api: cluster.Api, deployment: Deployment, node: str | None = None
) -> dict[str, Json]:
    """The device plugin's pod on each node (or on `node`), GFD/MPS pods left out
    (docs/upstream-facts.md P6)."""
    url = cluster.path("pods", namespace=deployment.namespace)
    field = f"spec.nodeName={node}" if node else ""
    pods: dict[str, Json] = {}
    for pod in api.list(url, label_selector=deployment.selector, field_selector=field):
        where = str((pod.get("spec") or {}).get("nodeName") or "")
        deleting = (pod.get("metadata") or {}).get("deletionTimestamp")
        if where and not deleting and deployments.is_plugin_pod(deployment, pod):
            pods[where] = pod
    return pods


def companion_pods(api: cluster.Api, deployment: Deployment, node: str | None = None) -> list[Json]:
    """GFD / MPS-daemon pods on `node` (or on every node) that read the same config
    (restarted with the plugin)."""
    if not deployment.companions:
        return []
    url = cluster.path("pods", namespace=deployment.namespace)
    found = []
    for pod in api.list(url, field_selector=f"spec.nodeName={node}" if node else ""):
        owners = (pod.get("metadata") or {}).get("ownerReferences") or []
        if any(o.get("name") in deployment.companions for o in owners):
            found.append(pod)
    return found


def replicas_in_use(api: cluster.Api) -> dict[str, dict[str, int]]:
    """Per node, the nvidia.com/* amounts requested by pods that have not ended (the server
    leaves out the others, and the pods no node was chosen for)."""
    field = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
    try:
        pods = [  # page by page
            facts.pod_from_dict(p) for p in api.list(cluster.path("pods"), field_selector=field)
        ]
    except errors.ClusterError as e:
        if e.status != 403:
            raise
        log.warning("replicas in use are not shown: %s", e.message)  # a namespaced user
        return {}
    return facts.gpu_usage(pods)  # summed as the scheduler sums a pod's containers


def _get_or_none(api: cluster.Api, url: str) -> Json | None:
    try:
        return api.get(url)
    except errors.ClusterError as e:
        if e.status == 404:
            return None
        raise


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))
