"""Small builders of doctor facts for the pure tests (not a test module)."""

from __future__ import annotations

from typing import Any

from kubectl_gpu.doctor import facts


def pod(
    limits: dict[str, str] | None = None,
    *,
    requests: dict[str, str] | None = None,
    node: str = "",
    selector: dict[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    env: dict[str, str] | None = None,
    **status: Any,
) -> facts.Pod:
    resources: dict[str, Any] = {
        "limits": limits if limits is not None else {"nvidia.com/gpu": "1"}
    }
    if requests is not None:
        resources["requests"] = requests
    container: dict[str, Any] = {"name": "cuda", "resources": resources}
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    spec: dict[str, Any] = {"containers": [container], "nodeName": node}
    if selector:
        spec["nodeSelector"] = selector
    if tolerations:
        spec["tolerations"] = tolerations
    return facts.pod_from_dict(
        {"metadata": {"name": "train", "namespace": "ml"}, "spec": spec, "status": status}
    )


def node(
    name: str,
    gpus: int = 0,
    *,
    used: int = 0,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    capacity: dict[str, str] | None = None,
    allocatable: dict[str, str] | None = None,
) -> facts.Node:
    capacity = capacity if capacity is not None else {"nvidia.com/gpu": str(gpus)}
    raw = {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true", **(labels or {})}},
        "spec": {"taints": taints or []},
        "status": {"capacity": capacity, "allocatable": allocatable or capacity},
    }
    return facts.node_from_dict(raw, {"nvidia.com/gpu": used})


GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
