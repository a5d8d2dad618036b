"""What `kubectl gpu doctor` knows about a pod and its cluster, read from raw API objects.

Owns the frozen facts the rules take (a pod, its containers and their states, nodes with their
taints, labels and free GPUs, events, ResourceQuotas) and the lenient readers that build them
from the JSON the API returns. Quantities are kept as the user wrote them: doctor must explain
a `nvidia.com/gpu: 0.5` the API would have refused. Must not decide anything (the layer
modules do) nor read the cluster (the workflow does). Pure: standard library and kubectl_gpu.keys.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from kubectl_gpu import keys

NVIDIA_PREFIX = "nvidia.com/"
_SUFFIXES = {
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
}
_DECIMAL_UP = ("", "k", "M", "G", "T", "P", "E")


def quantity(text: object) -> Fraction | None:
    """A Kubernetes quantity ("1", "0.5", "500m", "1k") as a number; None when unreadable."""
    value = str(text).strip()
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if value.endswith(suffix) and value[: -len(suffix)]:
            number = _number(value[: -len(suffix)])
            return None if number is None else number * _SUFFIXES[suffix]
    return _number(value)


def _number(text: str) -> Fraction | None:
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None


def canonical(text: object) -> str:
    """A decimal quantity as the API server writes it back in a message (resource.Quantity's
    String): "0.5" is "500m", "0.0005" is "1m", "2000m" is "2", "1000" is "1k". Binary-suffixed
    or unreadable text is returned as written."""
    written = str(text).strip()
    value = quantity(written)
    if value is None or written.endswith("i"):
        return written
    if value.denominator != 1:  # the server's defaulting rounds every amount up to 1m
        milli = value * 1000
        return f"{-(-milli.numerator // milli.denominator)}m"
    number, power = int(value), 0
    while number and number % 1000 == 0 and power < len(_DECIMAL_UP) - 1:
        number, power = number // 1000, power + 1
    return f"{number}{_DECIMAL_UP[power]}"


def whole(text: object) -> int:
    """An extended-resource amount as the scheduler counts it (unreadable or fractional: 0)."""
    value = quantity(text)
    return int(value) if value is not None and value.denominator == 1 and value > 0 else 0


@dataclasses.dataclass(frozen=True)
class Container:
    """One container's GPU-relevant spec: nvidia.com/* requests and limits, literal env."""

    name: str
    requests: Mapping[str, str]
    limits: Mapping[str, str]
    env: Mapping[str, str]
    init: bool = False

    @property
    def gpu_resources(self) -> tuple[str, ...]:
        return tuple(sorted({*self.requests, *self.limits}))

    def asked(self, resource: str) -> int:
        """The whole amount the scheduler will look for (limits imply requests)."""
        return whole(self.requests.get(resource, self.limits.get(resource, "0")))


@dataclasses.dataclass(frozen=True)
class ContainerState:
    """One container status: waiting/terminated reason and message, restarts, last exit."""

    name: str
    ready: bool
    started: bool
    restarts: int
    reason: str
    message: str
    last_message: str  # lastState.terminated.message
    terminated: bool = False  # state.terminated: this run ended, its log is still readable


@dataclasses.dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    phase: str
    reason: str  # status.reason, e.g. UnexpectedAdmissionError
    message: str
    node: str  # spec.nodeName; "" while unscheduled
    node_selector: Mapping[str, str]
    affinity_terms: tuple[Mapping[str, Any], ...] | None  # required terms; None: no affinity
    tolerations: tuple[Mapping[str, Any], ...]
    priority: int | None
    priority_class: str
    nominated_node: str
    containers: tuple[Container, ...]
    states: tuple[ContainerState, ...]

    @property
    def ref(self) -> str:
        return f"pod/{self.name}"

    def asked(self) -> dict[str, int]:
        """nvidia.com/* per pod as the scheduler sums it (init containers: the max)."""
        total: dict[str, int] = {}
        for c in (c for c in self.containers if not c.init):
            for r in c.gpu_resources:
                total[r] = total.get(r, 0) + c.asked(r)
        for c in (c for c in self.containers if c.init):
            for r in c.gpu_resources:
                total[r] = max(total.get(r, 0), c.asked(r))
        return {r: n for r, n in total.items() if n > 0}


@dataclasses.dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return (
            f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"
        )


@dataclasses.dataclass(frozen=True)
class Node:
    """A node, reduced to what placement and GPU health need."""

    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    capacity: Mapping[str, int]  # nvidia.com/* only
    allocatable: Mapping[str, int]
    used: Mapping[str, int]  # nvidia.com/* requested by pods bound here that have not ended

    @property
    def ref(self) -> str:
        return f"node/{self.name}"

    def free(self, resource: str) -> int:
        return max(self.allocatable.get(resource, 0) - self.used.get(resource, 0), 0)

    @property
    def is_gpu_node(self) -> bool:
        return bool(self.capacity) or self.labels.get(keys.GPU_PRESENT_LABEL) == "true"

    @property
    def device_plugin_off(self) -> bool:
        """No device plugin is meant to run here (`nvidia.com/gpu.deploy.device-plugin=false`:
        the GPU Operator's switch, which NVIDIA's DRA driver asks for on the nodes it serves),
        so the node advertises no extended GPU resources by design."""
        return self.labels.get(keys.DEPLOY_DEVICE_PLUGIN_LABEL) == "false"


@dataclasses.dataclass(frozen=True)
class Event:
    reason: str
    message: str
    type: str
    source: str
    count: int


@dataclasses.dataclass(frozen=True)
class Quota:
    name: str
    hard: Mapping[str, str]
    used: Mapping[str, str]


def pod_from_dict(pod: Mapping[str, Any]) -> Pod:
    meta, spec, status = _part(pod, "metadata"), _part(pod, "spec"), _part(pod, "status")
    inits = [_container(c, init=True) for c in _list(spec.get("initContainers"))]
    apps = [_container(c) for c in _list(spec.get("containers"))]
    states = [*_list(status.get("initContainerStatuses")), *_list(status.get("containerStatuses"))]
    priority = spec.get("priority")
    return Pod(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name", "")),
        phase=str(status.get("phase") or "Pending"),
        reason=str(status.get("reason") or ""),
        message=str(status.get("message") or ""),
        node=str(spec.get("nodeName") or ""),
        node_selector={str(k): str(v) for k, v in _map(spec.get("nodeSelector")).items()},
        affinity_terms=_affinity_terms(spec),
        tolerations=tuple(_list(spec.get("tolerations"))),
        priority=priority if isinstance(priority, int) else None,
        priority_class=str(spec.get("priorityClassName") or ""),
        nominated_node=str(status.get("nominatedNodeName") or ""),
        containers=(*apps, *inits),
        states=tuple(_state(s) for s in states),
    )


def node_from_dict(node: Mapping[str, Any], used: Mapping[str, int] | None = None) -> Node:
    meta, spec, status = _part(node, "metadata"), _part(node, "spec"), _part(node, "status")
    taints = tuple(
        Taint(str(t.get("key", "")), str(t.get("value") or ""), str(t.get("effect", "")))
        for t in _list(spec.get("taints"))
    )
    return Node(
        name=str(meta.get("name", "")),
        labels={str(k): str(v) for k, v in _map(meta.get("labels")).items()},
        annotations={str(k): str(v) for k, v in _map(meta.get("annotations")).items()},
        taints=taints,
        unschedulable=bool(spec.get("unschedulable")),
        capacity=_gpu_amounts(status.get("capacity")),
        allocatable=_gpu_amounts(status.get("allocatable")),
        used=dict(used or {}),
    )


def event_from_dict(event: Mapping[str, Any]) -> Event:
    source = _map(event.get("source")).get("component") or event.get("reportingComponent") or ""
    count = event.get("count")
    return Event(
        reason=str(event.get("reason") or ""),
        message=str(event.get("message") or event.get("note") or ""),
        type=str(event.get("type") or ""),
        source=str(source),
        count=count if isinstance(count, int) else 1,
    )


def quota_from_dict(quota: Mapping[str, Any]) -> Quota:
    spec, status = _part(quota, "spec"), _part(quota, "status")
    return Quota(
        name=str(_part(quota, "metadata").get("name", "")),
        hard={str(k): str(v) for k, v in _map(status.get("hard") or spec.get("hard")).items()},
        used={str(k): str(v) for k, v in _map(status.get("used")).items()},
    )


def gpu_usage(pods: Sequence[Pod]) -> dict[str, dict[str, int]]:
    """Per node, the nvidia.com/* amounts requested by bound pods that have not ended."""
    used: dict[str, dict[str, int]] = {}
    for pod in pods:
        if not pod.node or pod.phase in ("Succeeded", "Failed"):
            continue
        mine = used.setdefault(pod.node, {})
        for resource, amount in pod.asked().items():
            mine[resource] = mine.get(resource, 0) + amount
    return used


def _container(raw: Mapping[str, Any], init: bool = False) -> Container:
    resources = _map(raw.get("resources"))
    env = {
        str(e["name"]): str(e["value"])
        for e in _list(raw.get("env"))
        if "name" in e and e.get("value") is not None
    }
    return Container(
        name=str(raw.get("name", "")),
        requests=_gpu_texts(resources.get("requests")),
        limits=_gpu_texts(resources.get("limits")),
        env=env,
        init=init,
    )


def _state(raw: Mapping[str, Any]) -> ContainerState:
    state = _map(raw.get("state"))
    detail = _map(state.get("waiting")) or _map(state.get("terminated"))
    last = _map(_map(raw.get("lastState")).get("terminated"))
    return ContainerState(
        name=str(raw.get("name", "")),
        ready=bool(raw.get("ready")),
        started="running" in state,
        restarts=int(raw.get("restartCount") or 0),
        reason=str(detail.get("reason") or ""),
        message=str(detail.get("message") or ""),
        last_message=str(last.get("message") or ""),
        terminated="terminated" in state,
    )


def _affinity_terms(spec: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...] | None:
    node_affinity = _map(_map(spec.get("affinity")).get("nodeAffinity"))
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if not isinstance(required, Mapping):
        return None
    return tuple(_list(required.get("nodeSelectorTerms")))


def _gpu_texts(values: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in _map(values).items() if str(k).startswith(NVIDIA_PREFIX)}


def _gpu_amounts(values: object) -> dict[str, int]:
    return {k: whole(v) for k, v in _gpu_texts(values).items()}


def _part(obj: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    return _map(obj.get(name))


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []
