"""`kubectl gpu share show`: per node, the config it reads, what it advertises, what is wrong.

Owns the survey of the current state: each GPU node's selected key and how it was chosen,
strategy and replicas, physical devices, capacity, allocatable and replicas in use, its plugin
pod, and every mismatch a user would otherwise find on the node: a label naming a missing key,
an invalid key, an env var on the plugin container contradicting the key (docs/upstream-facts.md
 P1.1, P8), capacity ≠ physical × replicas (the plugin reads its config only
at start, docs/upstream-facts.md P3.3), GFD labels that disagree, a plugin pod that is missing or
failing. Must not read the cluster (callers pass pods and usage in). Pure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from kubectl_gpu import keys
from kubectl_gpu.sharing import deployment as deployments
from kubectl_gpu.sharing import names
from kubectl_gpu.sharing.rollout import plan
from kubectl_gpu.sharing.rollout.nodes import GpuNode
from kubectl_gpu.sharing.rollout.state import ClusterState, Doc, Unknown

CRASH_LOOP = "CrashLoopBackOff"


def _detail(container_status: Mapping[str, Any]) -> Mapping[str, Any]:
    """The waiting (or, failing that, terminated) state of one container status."""
    state = container_status.get("state") or {}
    return state.get("waiting") or state.get("terminated") or {}


def _last_exit_code(container_status: Mapping[str, Any]) -> int:
    last = (container_status.get("lastState") or {}).get("terminated") or {}
    code = last.get("exitCode")
    return code if isinstance(code, int) else 0


@dataclasses.dataclass(frozen=True)
class PluginPod:
    """The device plugin's pod on one node, as far as its health goes."""

    name: str
    phase: str
    ready: bool
    restarts: int
    reason: str = ""  # waiting/terminated reason, e.g. CrashLoopBackOff
    message: str = ""
    uid: str = ""
    last_exit_code: int = 0  # of the container's run before this one (lastState.terminated)

    @classmethod
    def from_dict(cls, pod: Mapping[str, Any], container: str) -> PluginPod:
        """Read a raw Pod; `container` is the plugin container's name."""
        status = pod.get("status") or {}
        apps = status.get("containerStatuses") or []
        every = [*(status.get("initContainerStatuses") or []), *apps]
        mine: Mapping[str, Any] = next((s for s in apps if s.get("name") == container), {})
        # A crash-looping init container or config-manager sidecar stops the plugin too.
        failing = next((s for s in every if _detail(s).get("reason") == CRASH_LOOP), None)
        chosen = failing or mine
        detail = _detail(chosen)
        message = str(detail.get("message") or "")
        if failing is not None and failing.get("name") != container:
            message = f"container {failing.get('name')}: {message}".rstrip(": ")
        conditions = status.get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        meta = pod.get("metadata") or {}
        return cls(
            name=str(meta.get("name", "")),
            phase=str(status.get("phase", "Pending")),
            ready=ready and bool(mine.get("ready", True)),
            restarts=int(chosen.get("restartCount") or 0),
            reason=str(detail.get("reason", "")),
            message=message,
            uid=str(meta.get("uid", "")),
            last_exit_code=_last_exit_code(chosen),
        )

    @property
    def status(self) -> str:
        """kubectl's STATUS column: the waiting reason when there is one, else the phase."""
        return self.reason or self.phase

    @property
    def running(self) -> bool:
        return self.phase == "Running" and self.ready and not self.reason

    @property
    def crash_looping(self) -> bool:
        """Failing repeatedly: it will not come up on its own."""
        return self.reason == CRASH_LOOP or (self.restarts > 0 and not self.running)


@dataclasses.dataclass(frozen=True)
class NodeStatus:
    """One row of `share show`."""

    node: str
    key: str  # "" when the node reads no key (the plugin's defaults)
    selected_by: str  # label | default | named | single | empty | unset | none
    strategy: str
    replicas: int
    resource: str  # the name advertised under the node's config
    gpus: int | None
    capacity: int
    allocatable: int
    in_use: int
    plugin_pod: str
    plugin_status: str
    problems: tuple[str, ...]
    config_error: str = ""  # the problem with the config the node selects, if any

    @property
    def plugin_down(self) -> bool:
        """No plugin pod runs here, or it fails: the node advertises nothing new."""
        return self.plugin_status != "Running"

    def explain(self) -> str:
        """One sentence: where the config comes from and what it should give."""
        source = f"key {self.key} ({self.selected_by})" if self.key else "no key (plugin defaults)"
        gpus = "? physical device(s)" if self.gpus is None else f"{self.gpus} physical device(s)"
        if self.strategy == "none":
            promise = f"{gpus}, not shared"
        else:
            total = "?" if self.gpus is None else str(self.gpus * self.replicas)
            promise = f"{gpus} × {self.replicas} {self.strategy} replicas = {total} {self.resource}"
        seen = (
            f"advertises {self.capacity} (allocatable {self.allocatable}), "
            f"{self.in_use} in use by pods"
        )
        return f"{source}: {promise}; {seen}"


def survey(
    state: ClusterState,
    pods: Mapping[str, PluginPod],
    in_use: Mapping[str, Mapping[str, int]],
    resource: str | None = None,
) -> tuple[NodeStatus, ...]:
    """A row per GPU node; `pods` and `in_use` (resource → requested) are keyed by node;
    `resource` None reports on each node the resource its config shares."""
    return tuple(
        _node_status(state, node, pods.get(node.name), in_use.get(node.name, {}), resource)
        for node in state.nodes
    )


def _node_status(
    state: ClusterState,
    node: GpuNode,
    pod: PluginPod | None,
    in_use: Mapping[str, int],
    wanted: str | None,
) -> NodeStatus:
    chosen = state.selection_before(node)
    doc = state.doc_before(node)
    resource = wanted or _shared_resource(doc)
    replicas, name = plan.sharing_of(doc, resource)
    gpus = node.physical(resource) or plan.gpus_from_allocatable(node, resource, replicas)
    selection_problems = _selection_problems(state, chosen.key, chosen.error, doc)
    problems = [*selection_problems]
    # Without GFD's count, `gpus` comes from allocatable itself: comparing capacity with it
    # would only restate capacity ≠ allocatable (unhealthy GPUs), not another config.
    counted = gpus if node.physical(resource) else None
    if resource != names.DEFAULT_RESOURCE or not _partitioned(node):
        # GPUs in MIG mode are advertised as nvidia.com/mig-*, not as nvidia.com/gpu
        problems += _capacity_problems(node, resource, name, replicas, counted)
    plugin_status = _plugin_status(pod, bool(selection_problems))
    problems += _plugin_problems(state.deployment, pod, plugin_status)
    problems += _overcommit_problems(node, name, in_use.get(name, 0))
    if not isinstance(doc, Unknown) and chosen.key:
        problems += _override_problems(state.deployment, chosen.key, doc)
    return NodeStatus(
        node=node.name,
        key=chosen.key,
        selected_by=chosen.how,
        strategy=plan.strategy_of(doc),
        replicas=replicas,
        resource=name,
        gpus=gpus,
        capacity=node.capacity.get(name, 0),
        allocatable=node.allocatable.get(name, 0),
        in_use=in_use.get(name, 0),
        plugin_pod=pod.name if pod else "",
        plugin_status=plugin_status,
        problems=tuple(problems),
        config_error=selection_problems[0] if selection_problems else "",
    )


def _plugin_status(pod: PluginPod | None, config_invalid: bool) -> str:
    """The plugin's state; on a config it refuses, a run restarted after a failed one is a crash
    loop caught between back-offs: NVIDIA's plugin exits again once it reads the config, and a
    user must not be told it runs because `doctor` looked during that moment."""
    if pod is None:
        return "missing"
    if config_invalid and not pod.reason and pod.restarts and pod.last_exit_code:
        return CRASH_LOOP
    return pod.status


def _shared_resource(doc: Doc | Unknown) -> str:
    """The resource a config shares (nvidia.com/gpu where it shares that or nothing): a node
    sharing only `nvidia.com/mig-1g.10gb` is reported on that."""
    config = plan.model_of(doc)
    shared = [] if config is None or config.sharing is None else config.sharing.resources
    found = [r.name for r in shared]
    return names.DEFAULT_RESOURCE if not found or names.DEFAULT_RESOURCE in found else found[0]


def _partitioned(node: GpuNode) -> bool:
    """The node advertises MIG devices under their own names (MIG strategy mixed): its
    physical GPU count says nothing about what it advertises as whole GPUs."""
    return any(r.startswith(keys.MIG_RESOURCE_PREFIX) and n > 0 for r, n in node.capacity.items())


def _selection_problems(state: ClusterState, key: str, error: str, doc: object) -> list[str]:
    configmap = state.configmap
    if error:
        return [
            f'config-manager fails with "{error}": the plugin keeps its old config and does not '
            "start again after a restart"
        ]
    if key and key in configmap.problems:
        return [f"key {key} is not a valid config: {configmap.problems[key]}"]
    if isinstance(doc, Unknown):
        return ["the plugin reads a ConfigMap other than " + configmap.name]
    return []


def _capacity_problems(
    node: GpuNode, resource: str, name: str, replicas: int, gpus: int | None
) -> list[str]:
    problems = []
    expected = None if gpus is None else gpus * replicas
    if expected is not None and node.capacity.get(name, 0) != expected:
        problems.append(
            f"capacity {node.capacity.get(name, 0)} {name} ≠ {gpus} physical × {replicas} "
            "replicas: the plugin runs another config (it reads its config only at start; "
            "restart it)"
        )
    labelled = node.labels.get(resource + ".replicas")
    if labelled is not None and labelled != str(replicas):
        problems.append(f"GFD label {resource}.replicas={labelled} disagrees (GFD may lag)")
    return problems


def _overcommit_problems(node: GpuNode, name: str, held: int) -> list[str]:
    advertised = node.capacity.get(name, 0)  # allocatable drops to 0 while a plugin restarts
    if held <= advertised:
        return []
    return [
        f"running pods hold {held} {name} but the node advertises {advertised}: they keep "
        f"running until restarted, then {held - advertised} of them will not fit"
    ]


def _plugin_problems(
    deployment: deployments.Deployment, pod: PluginPod | None, status: str
) -> list[str]:
    """`status`: the plugin's state as `_plugin_status` reads it."""
    if pod is None:
        return [f"no device plugin pod ({deployment.selector}) runs on this node"]
    if pod.running and status == pod.status:
        return []
    if status != pod.status:  # between two crashes
        detail = f": its last run exited with code {pod.last_exit_code}"
    else:
        detail = f": {pod.message}" if pod.message else ""
    return [f"plugin pod {pod.name} is {status} ({pod.restarts} restarts){detail}"]


def _override_problems(deployment: deployments.Deployment, key: str, doc: object) -> list[str]:
    conflicts = deployments.overridden_flags(deployment, doc if isinstance(doc, Mapping) else None)
    return [
        f"env {env}={forced} on container {deployment.container} overrides flags.{path}: "
        f"{value} in key {key}"
        for env, forced, path, value in conflicts
    ]
