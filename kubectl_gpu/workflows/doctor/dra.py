"""`kubectl gpu doctor`, the DRA side of one pod: read its ResourceClaims, the DeviceClasses,
the ResourceSlices and the NVIDIA DRA driver's feature gates, at the `resource.k8s.io` version
the server serves.

Owns these reads and their cost: nothing at all for a pod that uses no claim and is bound or
asks for no `nvidia.com/gpu`, or when the server serves no DRA; otherwise one GET per claim
and one LIST each of claims (who holds which device), classes, slices and DaemonSets. A 403
or 404 leaves the fact out. The CEL evaluator (kubectl_gpu.cel, cel-python) is imported here,
only for such a pod. Must not decide.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import Any

from kubectl_gpu import cluster, errors
from kubectl_gpu.doctor import dra as dramodel
from kubectl_gpu.doctor import drafacts
from kubectl_gpu.doctor.dra import DraCase, Evaluate
from kubectl_gpu.workflows import map as reading

log = logging.getLogger(__name__)
Json = dict[str, Any]
CEL_REQUIREMENT = "cel-python>=0.5,<1"  # setup.cfg's `dra` extra


def gather(api: cluster.Api, pod: Mapping[str, Any]) -> DraCase | None:
    """The DRA facts about `pod`, or None when it has no DRA side to check."""
    names = claim_names(pod)
    bound = bool((pod.get("spec") or {}).get("nodeName"))
    if not names and (bound or not _asks_for_gpus(pod)):
        return None  # no claim, and no pending nvidia.com/gpu that DRA might be asked to serve
    version = reading.dra_version(api)
    if version is None:
        return None
    namespace = str((pod.get("metadata") or {}).get("namespace") or "")
    claims = [c for c in (_claim(api, namespace, n, version) for n in names) if c]
    classes = _list(api, "deviceclasses", version)
    slices = _list(api, "resourceslices", version)
    evaluate = _evaluator()
    return DraCase(
        claims=tuple(drafacts.claim_from_dict(c) for c in claims),
        classes={c.name: c for c in map(drafacts.class_from_dict, classes)},
        devices=tuple(d for s in slices for d in drafacts.devices_from_slice(s)),
        gates=drafacts.feature_gates(_optional(lambda: api.list(cluster.path("daemonsets")))),
        evaluate=evaluate,
        taken=drafacts.holders(_list(api, "resourceclaims", version)),
        cel_install=dramodel.CEL_EXTRA if evaluate else cel_install(),
    )


def cel_install() -> str:
    """How to install cel-python for the Python running kubectl gpu. The krew archive (its
    entry names itself in `__main__.KUBECTL_GPU_ARCHIVE`, scripts/release.py) needs cel-python
    alone, in the user's site-packages, which it reads: the `dra` extra would install a second
    copy of the plugin beside it."""
    if not getattr(sys.modules.get("__main__"), "KUBECTL_GPU_ARCHIVE", None):
        return dramodel.CEL_EXTRA
    return f"{sys.executable} -m pip install --user '{CEL_REQUIREMENT}'"


def _evaluator() -> Evaluate | None:
    """kubectl_gpu.cel's evaluator, imported only for a pod with a DRA side; None when
    cel-python (the `dra` extra) is not installed."""
    try:
        from kubectl_gpu import cel
    except ImportError as e:
        log.info("no CEL evaluator: %s", e)
        return None
    return cel.matches


def claim_names(pod: Mapping[str, Any]) -> list[str]:
    """The ResourceClaims a pod uses: named, made from a template, or for an extended resource."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    named = {
        str(c.get("name")): c.get("resourceClaimName") for c in spec.get("resourceClaims") or []
    }
    for generated in status.get("resourceClaimStatuses") or []:
        named[str(generated.get("name"))] = generated.get("resourceClaimName")
    found = [n for n in named.values() if isinstance(n, str)]
    extended = (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    return found + ([extended] if isinstance(extended, str) else [])


def _asks_for_gpus(pod: Mapping[str, Any]) -> bool:
    containers = (pod.get("spec") or {}).get("containers") or []
    return any(
        "nvidia.com/gpu" in ((c.get("resources") or {}).get("limits") or {}) for c in containers
    )


def _claim(api: cluster.Api, namespace: str, name: str, version: str) -> Json | None:
    try:
        return api.get(cluster.path("resourceclaims", name, namespace, version=version))
    except errors.ClusterError as e:
        if e.status not in (403, 404):
            raise
        log.warning("resourceclaim %s left out of the diagnosis: %s", name, e.message)
        return None


def _list(api: cluster.Api, resource: str, version: str) -> list[Json]:
    return _optional(lambda: api.list(cluster.path(resource, version=version)))


def _optional(read: Any) -> list[Json]:
    try:
        return list(read())
    except errors.ClusterError as e:
        if e.status not in (403, 404):
            raise
        log.warning("left out of the diagnosis: %s", e.message)
        return []
