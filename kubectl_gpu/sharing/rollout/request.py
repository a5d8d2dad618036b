"""What the user asked `kubectl gpu share` for, and the checks no cluster is needed for.

Owns `ShareRequest` and its argument checks (replicas, resource name, MPS limits, a `--key`
that a node label can select): refused with a UsageError (exit 2) before anything is read.
Must not look at the cluster state (targets does). Pure.
"""

from __future__ import annotations

import dataclasses
import re

from kubectl_gpu import errors, keys
from kubectl_gpu.sharing import names, strategies

_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
MAX_LABEL_VALUE = 63


@dataclasses.dataclass(frozen=True)
class ShareRequest:
    """What the user asked for; `replicas` None turns sharing off, `nodes` None is cluster-wide."""

    replicas: int | None = None
    resource: str = names.DEFAULT_RESOURCE
    mps: bool = False
    rename_by_default: bool | None = None
    fail_requests_greater_than_one: bool | None = None
    nodes: tuple[str, ...] | None = None
    key: str | None = None

    @property
    def resource_name(self) -> str:
        return names.normalise_resource_name(self.resource)


def check_request(request: ShareRequest) -> None:
    """Refuse arguments no cluster could accept (UsageError, exit 2), before reading anything."""
    replicas = request.replicas
    if replicas is not None and (
        isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 2
    ):
        raise errors.UsageError(
            f"--replicas must be a whole number of at least 2, not {replicas!r}",
            hint="to stop sharing use `kubectl gpu share off` (upstream rejects replicas: 1)",
        )
    problem = _resource_problem(request.resource)
    if problem:
        raise errors.UsageError(
            f"invalid --resource '{request.resource}': {problem}",
            hint="use nvidia.com/gpu, or a MIG resource such as nvidia.com/mig-1g.10gb",
        )
    if request.mps:
        _check_mps_request(request)
    if request.key is not None and not _is_label_value(request.key):
        raise errors.UsageError(
            f"--key {request.key!r} cannot be selected by the node label "
            f"{keys.DEVICE_PLUGIN_CONFIG_LABEL}",
            hint="use at most 63 letters, digits, '-', '_' and '.', starting and ending with a "
            "letter or digit",
        )
    if request.nodes is not None and not request.nodes:
        raise errors.UsageError("no node was selected", hint="check --node or -l")


def _resource_problem(resource: str) -> str | None:
    if "/" in resource and not resource.startswith(names.RESOURCE_PREFIX):
        return "only the nvidia.com/ prefix is allowed"
    return names.upstream_error(resource)


def _check_mps_request(request: ShareRequest) -> None:
    cap = strategies.MPS_MAX_REPLICAS
    if request.replicas is not None and request.replicas > cap:
        raise errors.UsageError(
            f"MPS allows at most {cap} replicas per GPU, not {request.replicas}: the MPS control "
            'daemon would fail with "invalid MPS configuration: invalid device maximum allowed '
            f'replicas exceeded: {request.replicas} > {cap}"',
            hint=f"use --replicas {cap} or fewer (16 on GPUs below compute capability 7.5)",
        )
    if request.resource_name != names.DEFAULT_RESOURCE:
        raise errors.UsageError(
            f"MPS shares full GPUs only (nvidia.com/gpu), not {request.resource_name}",
            hint="use time-slicing (no --mps) to share MIG devices",
        )


def _is_label_value(value: str) -> bool:
    return len(value) <= MAX_LABEL_VALUE and _LABEL_VALUE.fullmatch(value) is not None
