"""Layer 1, API admission: GPU amounts the API server refuses, and quotas that refuse pods.

Owns the extended-resource rules the API server applies to a pod spec (whole numbers only;
limits required; requests equal to limits: pkg/apis/core/validation's wording, amounts
written back as the server writes them, "0.5" as "500m") and GPU
ResourceQuotas (`requests.nvidia.com/gpu`): full ones, and `exceeded quota` refusals found in
a controller's FailedCreate events when the pod does not exist. Works from the spec alone, so
it also explains objects that reached the cluster another way. Pure: standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from kubectl_gpu.doctor.facts import Container, Event, Pod, Quota, canonical, quantity
from kubectl_gpu.doctor.model import Diagnosis

QUOTA_PREFIX = "requests."
# The quota admission plugin's wording: "exceeded quota: NAME, requested: …, used: …, limited: …"
_EXCEEDED = re.compile(r"exceeded quota: (?P<quota>[^,\s]+)")
_SHARE_FIX = (
    "request whole GPUs, e.g. `nvidia.com/gpu: 1`; to give a pod part of a GPU, share it "
    "(`kubectl gpu share --replicas 4`, then request 1 replica) or request a MIG profile "
    "(e.g. nvidia.com/mig-1g.10gb)"
)


def check(pod: Pod) -> list[Diagnosis]:
    """Every GPU amount in the spec the API server would refuse."""
    found: list[Diagnosis] = []
    for index, container in _indexed(pod.containers):
        for resource in container.gpu_resources:
            found += _amounts(pod, container, index, resource)
    return found


def _indexed(containers: Sequence[Container]) -> Iterable[tuple[str, Container]]:
    apps = [c for c in containers if not c.init]
    inits = [c for c in containers if c.init]
    yield from ((f"containers[{i}]", c) for i, c in enumerate(apps))
    yield from ((f"initContainers[{i}]", c) for i, c in enumerate(inits))


def _amounts(pod: Pod, container: Container, where: str, resource: str) -> list[Diagnosis]:
    path = f"spec.{where}.resources"
    for kind, values in (("limits", container.limits), ("requests", container.requests)):
        text = values.get(resource)
        value = None if text is None else quantity(text)
        if text is not None and (value is None or value.denominator != 1):
            return [
                _error(
                    pod,
                    f"container {container.name} asks for {text} {resource}: "
                    "GPUs are whole devices",
                    f'{path}.{kind}[{resource}]: Invalid value: "{canonical(text)}": '
                    "must be an integer",
                    _SHARE_FIX,
                )
            ]
    request, limit = container.requests.get(resource), container.limits.get(resource)
    if request is not None and limit is None:
        return [
            _error(
                pod,
                f"container {container.name} requests {resource} without a limit",
                f"{path}.limits: Required value: Limit must be set for non overcommitable "
                "resources",
                f"set limits[{resource}] to {request} (extended resources cannot be "
                "overcommitted; a limit alone is enough)",
            )
        ]
    if request is not None and limit is not None and quantity(request) != quantity(limit):
        return [
            _error(
                pod,
                f"container {container.name} requests {request} {resource} but limits {limit}",
                f'{path}.requests: Invalid value: "{canonical(request)}": must be equal to '
                f"{resource} limit of {canonical(limit)}",
                f"make requests equal to limits, or set only limits[{resource}]",
            )
        ]
    return []


def _error(pod: Pod, message: str, evidence: str, fix: str) -> Diagnosis:
    return Diagnosis("admission", "error", pod.ref, message, (evidence,), fix)


def full_quotas(quotas: Sequence[Quota], asked: dict[str, int]) -> list[Diagnosis]:
    """GPU quotas with no room left for one more pod like this one (replacements are refused)."""
    found = []
    for quota in quotas:
        for resource, amount in sorted(asked.items()):
            key = QUOTA_PREFIX + resource
            hard, used = quantity(quota.hard.get(key, "")), quantity(quota.used.get(key, "0"))
            if hard is None or used is None or used + amount <= hard:
                continue
            found.append(
                Diagnosis(
                    "admission",
                    "warning",
                    f"resourcequota/{quota.name}",
                    f"quota {quota.name} has no room for another pod asking {amount} {resource}",
                    (f"used {key}={quota.used.get(key, '0')}, hard {key}={quota.hard[key]}",),
                    f"raise {key} on ResourceQuota {quota.name}, or delete GPU pods in this "
                    "namespace; a new or restarted pod like this one is refused",
                )
            )
    return found


def missing_pod(
    namespace: str, name: str, events: Sequence[Event], quotas: Sequence[Quota]
) -> list[Diagnosis]:
    """The pod does not exist: a controller's FailedCreate (quota, admission) says why."""
    wanted = f'pods "{name}'
    refused = [e for e in events if e.reason == "FailedCreate" and wanted in e.message]
    if refused:
        return [_refused(name, refused[-1].message, quotas)]
    gpu_quotas = [
        q for q in quotas if any(k.startswith(QUOTA_PREFIX + "nvidia.com/") for k in q.hard)
    ]
    return [
        Diagnosis(
            "admission",
            "error",
            f"pod/{name}",
            f"pod {namespace}/{name} not found, and no controller reported refusing to create it",
            tuple(
                f"ResourceQuota {q.name}: hard {dict(q.hard)}, used {dict(q.used)}"
                for q in gpu_quotas
            ),
            f"check the name and namespace (kubectl get pods -n {namespace})",
        )
    ]


def _refused(name: str, message: str, quotas: Sequence[Quota]) -> Diagnosis:
    """A controller's FailedCreate; for a quota, what that quota holds now."""
    exceeded = _EXCEEDED.search(message)
    if exceeded is None:
        return Diagnosis(
            "admission",
            "error",
            f"pod/{name}",
            "the API server refuses to create the pod",
            (f"FailedCreate: {message}",),
            "fix the pod template as the message says",
        )
    name_of = exceeded["quota"]
    quota = next((q for q in quotas if q.name == name_of), None)
    now = _gpu_numbers(quota) if quota else ""
    return Diagnosis(
        "admission",
        "error",
        f"pod/{name}",
        "the API server refuses to create the pod: a ResourceQuota is exceeded",
        (f"FailedCreate: {message}", *([f"ResourceQuota {name_of} now: {now}"] if now else [])),
        f"raise the quota's requests.nvidia.com/* (kubectl edit resourcequota {name_of}) "
        "or free GPUs in the namespace",
    )


def _gpu_numbers(quota: Quota) -> str:
    keys = sorted(k for k in quota.hard if k.startswith(QUOTA_PREFIX + "nvidia.com/"))
    return ", ".join(f"{k} used {quota.used.get(k, '0')} of {quota.hard[k]}" for k in keys)
