"""dcgm-exporter's metrics as `top` rows, with device-level figures never passed off as a pod's.

dcgm-exporter (NVIDIA/dcgm-exporter) labels each GPU's metrics with `gpu`, `UUID`,
`modelName`, `Hostname` and, for MIG devices, `GPU_I_ID` and `GPU_I_PROFILE`; with its
Kubernetes mapping on, a metric of a device a pod holds also carries `pod`, `namespace` and
`container` (and `vgpu`, the replica, with `--kubernetes-virtual-gpus`). Those pod labels
sit on the *device's* figures: with time-slicing every sharing pod gets the same copied
value (dcgm-exporter #587). Only dcgm-exporter 4.5.3-4.8.2 and later, with
`KUBERNETES_VIRTUAL_GPUS` on (and hostPID, to map PIDs), replace `DCGM_FI_DEV_FB_USED`
(MiB) and `DCGM_FI_DEV_GPU_UTIL` (%) on a pod's series with the pod's own processes' values
(its PR #594; MIG: memory only). `per_process` says which form an exporter pod serves,
read from its pod spec; `rows` builds `top` rows marking copies (`TopRow.copied`). Pure:
standard library only.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubectl_gpu.usage import isolation
from kubectl_gpu.usage.prometheus import Sample
from kubectl_gpu.usage.view import GPU, POD, TopRow

FB_USED, FB_FREE, GPU_UTIL = "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_UTIL"
PER_PROCESS_FIELDS = (FB_USED, GPU_UTIL)  # the only two it splits per process
PER_PROCESS_SINCE = (4, 5, 3)  # the first dcgm-exporter release with per-process values
VIRTUAL_GPUS_ENV = "KUBERNETES_VIRTUAL_GPUS"
VIRTUAL_GPUS_FLAG = "--kubernetes-virtual-gpus"
_MIB = 2**20
DEVICE_COPY = "device-copy"
COPY_NOTE = (
    "dcgm-exporter copies the device's figures onto each pod (no per-process values): "
    "see the GPU row"
)
_VERSION = re.compile(r":(\d+)\.(\d+)\.(\d+)-")  # nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-…


def per_process(pod: Mapping[str, Any]) -> bool:
    """Whether a dcgm-exporter pod serves per-process values: release >= 4.5.3 (its image
    tag), virtual GPUs on (env or flag) and the host's PIDs (`hostPID`)."""
    spec = pod.get("spec") or {}
    if not spec.get("hostPID"):
        return False
    for container in spec.get("containers") or []:
        found = _VERSION.search(str(container.get("image") or ""))
        if found is None or tuple(map(int, found.groups())) < PER_PROCESS_SINCE:
            continue
        env = {str(e.get("name")): str(e.get("value", "")) for e in container.get("env") or []}
        argv = [str(a) for a in (container.get("args") or []) + (container.get("command") or [])]
        if env.get(VIRTUAL_GPUS_ENV, "").lower() in ("true", "1") or any(
            a == VIRTUAL_GPUS_FLAG or a.startswith(VIRTUAL_GPUS_FLAG + "=true") for a in argv
        ):
            return True
    return False


def rows(node: str, samples: Sequence[Sample], own: bool) -> list[TopRow]:
    """One node's rows: per GPU (or MIG device) its own totals, then one row per pod series;
    `own` (per_process) says whether a pod's figures are its own or the device's copied."""
    devices: dict[tuple[str, str | None], dict[str, Any]] = {}
    pods: dict[tuple[str, str | None, str, str, str | None, str | None], dict[str, Any]] = {}
    for s in samples:
        if s.name not in (FB_USED, FB_FREE, GPU_UTIL):
            continue
        uuid = s.label("UUID") or f"gpu {s.label('gpu')}"
        mig = s.label("GPU_I_ID")
        device = devices.setdefault((uuid, mig), {"labels": s})
        if s.label("pod") is None:
            device[s.name] = s.value
            continue
        key = (
            uuid,
            mig,
            s.label("namespace") or "",
            s.label("pod") or "",
            s.label("container"),
            s.label("vgpu"),
        )
        pods.setdefault(key, {"labels": s})[s.name] = s.value
        if not own or s.name not in PER_PROCESS_FIELDS:  # a copy carries the device's figure
            device.setdefault("from_pod", {})[s.name] = s.value
    found: list[TopRow] = []
    for (uuid, mig), facts in sorted(devices.items(), key=lambda d: (d[0][0], d[0][1] or "")):
        found.append(_device_row(node, uuid, mig, facts))
        holders = [(k, v) for k, v in pods.items() if k[:2] == (uuid, mig)]
        names = tuple(f"{k[2]}/{k[3]}" for k, _ in holders)
        for key, values in holders:
            found.append(_pod_row(node, key, values, own, names))
    return found


def _device_row(node: str, uuid: str, mig: str | None, facts: Mapping[str, Any]) -> TopRow:
    s: Sample = facts["labels"]
    values = {
        **facts.get("from_pod", {}),
        **{k: v for k, v in facts.items() if k.startswith("DCGM")},
    }
    used, free = values.get(FB_USED), values.get(FB_FREE)
    total = int((used + free) * _MIB) if used is not None and free is not None else None
    return TopRow(
        node,
        _int(s.label("gpu")),
        uuid,
        s.label("modelName"),
        GPU,
        f"mig {s.label('GPU_I_PROFILE')}" if mig else "",
        None,
        memory_used=int(used * _MIB) if used is not None else None,
        memory_total=total,
        sm_percent=_int_value(values.get(GPU_UTIL)),
        sm_unavailable=None if values.get(GPU_UTIL) is not None else ("mig" if mig else "not-read"),
    )


def _pod_row(
    node: str, key: tuple[Any, ...], values: Mapping[str, Any], own: bool, names: tuple[str, ...]
) -> TopRow:
    uuid, mig, namespace, pod, container, vgpu = key
    s: Sample = values["labels"]
    used, util = values.get(FB_USED), values.get(GPU_UTIL)
    me = f"{namespace}/{pod}"
    neighbours = tuple(n for n in names if n != me)
    limit = (
        isolation.Limit(isolation.NONE, neighbours=neighbours)
        if neighbours or vgpu
        else (isolation.Limit(isolation.UNKNOWN))
    )
    device = f"mig {s.label('GPU_I_PROFILE')}" if mig else (f"::{vgpu}" if vgpu else "gpu")
    row = functools.partial(
        TopRow, node, _int(s.label("gpu")), uuid, s.label("modelName"), POD, device, None,
        namespace=namespace, pod=pod, container=container, limit=limit,
    )  # fmt: skip
    if not own:  # the device's figures: shown on the GPU row only, never as the pod's
        return row(sm_unavailable=DEVICE_COPY, note=COPY_NOTE, copied=True)
    return row(
        memory_used=int(used * _MIB) if used is not None else None,
        sm_percent=_int_value(util) if not mig else None,
        sm_unavailable="mig" if mig else (None if util is not None else "not-read"),
    )


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def _int_value(value: float | None) -> int | None:
    return None if value is None else round(value)


def exporter_pods(pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The running exporter pods with a node and an IP, one per node."""
    found: dict[str, Mapping[str, Any]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        status = pod.get("status") or {}
        if node and status.get("phase") == "Running" and status.get("podIP"):
            found.setdefault(str(node), pod)
    return list(found.values())
