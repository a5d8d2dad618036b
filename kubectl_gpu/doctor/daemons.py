"""Whether a DaemonSet's pod comes back on a node once it is deleted or its node is relabelled.

Owns the question the DaemonSet controller answers before it (re)creates a daemon pod on a
node (kubernetes pkg/controller/daemon, NodeShouldRunDaemonPod): every `NoSchedule` and
`NoExecute` taint of the node tolerated, the pod template's node selector and required node
affinity met. The controller adds its own tolerations to every daemon pod (not-ready,
unreachable, disk/memory/pid pressure, unschedulable, and network-unavailable for host-network
pods: docs/first-try-safety.md), so a cordon never keeps a daemon pod away, while a
foreign taint such as `dedicated=ml:NoSchedule` does: an existing pod stays (NoSchedule evicts
nothing), but one that `share` or `mig apply` deletes is never recreated. A `Blocker` says which
taint or selector stops it and the toleration to add. Must not read the cluster (the workflow
passes the objects), nor count the taints Kubernetes sets from node conditions
(`node.kubernetes.io/*`, e.g. not-ready on a node whose kubelet is down): they are the node's
health, not a reservation. Pure: standard library, kubectl_gpu.keys and the sibling doctor modules.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from kubectl_gpu import keys
from kubectl_gpu.doctor import facts, placement
from kubectl_gpu.doctor.facts import Taint

# What the DaemonSet controller adds to every daemon pod (pkg/controller/daemon/util,
# AddOrUpdateDaemonPodTolerations): these taints never keep a daemon pod off a node.
AUTOMATIC: tuple[Mapping[str, str], ...] = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)
# Taints Kubernetes sets and lifts itself from node conditions (not-ready, unreachable, …):
# they say the node is unwell now, which the rollout's own waits report; they are not a
# reservation the DaemonSet was never told about, the case this check is for.
CONDITION_PREFIX = "node.kubernetes.io/"
HOST_NETWORK = {"key": "node.kubernetes.io/network-unavailable", "operator": "Exists",
                "effect": "NoSchedule"}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class DaemonSet:
    """A DaemonSet reduced to what decides where its pods run, and who manages it."""

    namespace: str
    name: str
    role: str  # e.g. "device plugin", "GPU feature discovery", "kubectl-gpu agent"
    template: facts.Pod  # the pod template, read as a pod (tolerations, selector, affinity)
    manager: str = ""  # "gpu-operator" | "helm" | "": who overwrites a hand edit of it
    rolling: str = ""  # why it is mid-rollout ("" when it is not)

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclasses.dataclass(frozen=True)
class Blocker:
    """Why `daemonset` would not bring a pod back on `node`."""

    daemonset: DaemonSet
    node: str
    taints: tuple[Taint, ...]  # blocking taints it does not tolerate
    unmet: tuple[str, ...]  # node selector / required affinity the node does not meet
    rolling: bool = False  # the DaemonSet is mid-rollout (daemonset.rolling says why)

    def reason(self) -> str:
        """One sentence: what keeps the pod away."""
        who = f"the {self.daemonset.role} DaemonSet {self.daemonset.ref}"
        if self.rolling:
            return (
                f"{who} is mid-rollout ({self.daemonset.rolling}): a plugin pod deleted now "
                "would come back with whichever template the rollout has reached, on its "
                "schedule, not this change's"
            )
        parts = []
        if self.taints:
            taints = ", ".join(str(t) for t in self.taints)
            parts.append(f"does not tolerate taint {taints} of node {self.node}")
        if self.unmet:
            parts.append(f"does not select node {self.node} ({'; '.join(self.unmet)})")
        return f"{who} {' and '.join(parts)}"

    def fix(self) -> str:
        """What to do: the toleration to add (where it sticks), or the taint to remove; or
        wait for a rollout."""
        return "; or ".join(p for p in (self.toleration(), self.removal(), self.wait()) if p)

    def toleration(self) -> str:
        """How to make the DaemonSet tolerate the taints, or match the node ("" for neither)."""
        steps = []
        if self.taints:
            steps.append(_where_to_add(self.daemonset, [toleration_for(t) for t in self.taints]))
        if self.unmet and any(keys.PAUSED_FOR_MIG_CHANGE in u for u in self.unmet):
            steps.append(
                f"a MIG change paused it on node {self.node} and did not finish: bring it back "
                f"with `kubectl gpu mig recover {self.node}`"
            )
        elif self.unmet:
            steps.append(
                f"make the node selector/affinity of DaemonSet {self.daemonset.ref} match node "
                f"{self.node} (kubectl get ds -n {self.daemonset.namespace} "
                f"{self.daemonset.name} -o yaml)"
            )
        return "; ".join(steps)

    def wait(self) -> str:
        """How to let a rollout finish first ("" when none is under way)."""
        if not self.rolling:
            return ""
        ds = self.daemonset
        return f"wait for its rollout: kubectl rollout status -n {ds.namespace} daemonset/{ds.name}"

    def removal(self) -> str:
        """The command that removes the taints instead ("" when no taint blocks)."""
        if not self.taints:
            return ""
        removals = " ".join(f"{t.key}:{t.effect}-" for t in self.taints)
        return f"remove the taint: kubectl taint node {self.node} {removals}"


def daemonset_from_dict(raw: Mapping[str, Any], role: str, manager: str = "") -> DaemonSet:
    """Read a raw DaemonSet: its pod template as a pod, and whether it is mid-rollout."""
    meta, spec = _map(raw.get("metadata")), _map(raw.get("spec"))
    template = _map(spec.get("template"))
    pod_spec = _map(template.get("spec"))
    pod = facts.pod_from_dict(
        {"metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")},
         "spec": pod_spec}
    )  # fmt: skip
    extra = [*AUTOMATIC]
    if pod_spec.get("hostNetwork") is True:
        extra.append(HOST_NETWORK)
    pod = dataclasses.replace(pod, tolerations=(*pod.tolerations, *extra))
    return DaemonSet(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        role=role,
        template=pod,
        manager=manager,
        rolling="" if _on_delete(spec) else _rolling(meta, raw.get("status")),
    )


def blocker(daemonset: DaemonSet, node: facts.Node) -> Blocker | None:
    """What keeps `daemonset` from running a pod on `node` (None: nothing does)."""
    taints = tuple(
        t
        for t in placement.untolerated(daemonset.template, node)
        if not t.key.startswith(CONDITION_PREFIX)
    )
    unmet = placement.unmet(daemonset.template, node)
    if not taints and not unmet:
        return None
    return Blocker(daemonset, node.name, taints, unmet)


def selects(daemonset: DaemonSet, node: facts.Node) -> bool:
    """Whether the DaemonSet's node selector and required affinity match `node` (its pods
    belong there at all), taints aside."""
    return not placement.unmet(daemonset.template, node)


def toleration_for(taint: Taint) -> dict[str, str]:
    """The narrowest toleration of one taint."""
    if taint.value:
        return {"key": taint.key, "operator": "Equal", "value": taint.value, "effect": taint.effect}
    return {"key": taint.key, "operator": "Exists", "effect": taint.effect}


def _where_to_add(daemonset: DaemonSet, wanted: Sequence[Mapping[str, str]]) -> str:
    listed = ", ".join(_flow(t) for t in wanted)
    if daemonset.manager == "gpu-operator":
        return (
            f"add the toleration(s) {listed} to the ClusterPolicy's spec.daemonsets.tolerations "
            "(the GPU Operator renders its DaemonSets from it and undoes edits made to them)"
        )
    ops: list[dict[str, Any]] = [
        {"op": "add", "path": "/spec/template/spec/tolerations/-", "value": dict(t)} for t in wanted
    ]
    if not _had_tolerations(daemonset):  # `/-` needs a list to append to
        ops = [{"op": "add", "path": "/spec/template/spec/tolerations", "value": [*wanted]}]
    patch = json.dumps(ops, separators=(",", ":"))
    command = (
        f"kubectl -n {daemonset.namespace} patch daemonset {daemonset.name} --type=json "
        f"-p '{patch}'"
    )
    if daemonset.manager == "helm":
        return (
            f"add the toleration(s) {listed} to the Helm release's `tolerations` value "
            f"(helm upgrade … --reuse-values), or for now: {command}"
        )
    return f"add the toleration(s) {listed}: {command}"


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _had_tolerations(daemonset: DaemonSet) -> bool:
    automatic = len(AUTOMATIC) + (1 if HOST_NETWORK in daemonset.template.tolerations else 0)
    return len(daemonset.template.tolerations) > automatic


def _flow(toleration: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in toleration.items()) + "}"


def _on_delete(spec: Mapping[str, Any]) -> bool:
    """`updateStrategy: OnDelete`: pods take a new template only when deleted, so a template
    not yet everywhere is no rollout under way (deleting the pod is how it spreads)."""
    return _map(spec.get("updateStrategy")).get("type") == "OnDelete"


def _rolling(meta: Any, status: Any) -> str:
    """Why the DaemonSet is mid-rollout: its controller has not seen the latest template, or
    not every node runs it yet."""
    meta = meta if isinstance(meta, Mapping) else {}
    status = status if isinstance(status, Mapping) else {}
    generation, observed = meta.get("generation"), status.get("observedGeneration")
    if isinstance(generation, int) and isinstance(observed, int) and observed < generation:
        return "its controller has not yet rolled out its latest pod template"
    # the API omits a count of 0 (omitempty): no updatedNumberScheduled is none updated yet
    desired, updated = status.get("desiredNumberScheduled"), status.get("updatedNumberScheduled", 0)
    if isinstance(desired, int) and isinstance(updated, int) and updated < desired:
        return f"only {updated} of its {desired} pods run its latest pod template"
    return ""
