"""A dcgm-exporter stand-in on simulated GPU nodes, as the GPU Operator lays it out (test code).

The GPU Operator runs dcgm-exporter as DaemonSet `nvidia-dcgm-exporter` (pods
`nvidia-dcgm-exporter-…`, label `app=nvidia-dcgm-exporter`, port 9400; NVIDIA/gpu-operator
`assets/state-dcgm-exporter/`). A reader
with no agent of ours can scrape each node's exporter through the API server's pod proxy
(`pods/NAME:9400/proxy/metrics`, as krew's `gpugo` does). Here each such pod's process is an HTTP
server inside its node's network namespace (netns.py) on the pod's IP, answering `/metrics` in
dcgm-exporter's Prometheus text format from the node's NVML state, the kubelet's device
assignments (what the real one reads from PodResources) and the node's `/proc/PID/cgroup` files,
in one of the two forms its releases have:

- **copied** (the default): one series per device (GPU, or MIG instance with `GPU_I_ID` and
  `GPU_I_PROFILE`) and pod holding it, labels `gpu`, `UUID`, `pci_bus_id`, `device`,
  `modelName`, `Hostname`, `DCGM_FI_DRIVER_VERSION`, `container`, `namespace`, `pod` (empty for
  a device no pod holds); every pod sharing a time-sliced GPU gets the device's own figures
  copied (dcgm-exporter #307, #587);
- **per-process** (NVIDIA/dcgm-exporter PR #594, first in release 4.5.3-4.8.2, with
  `KUBERNETES_VIRTUAL_GPUS=true` in the container's environment, the switch; read from that
  release's `internal/pkg/transformation/kubernetes.go` and `process_metrics.go`): for
  `DCGM_FI_DEV_FB_USED` and `DCGM_FI_DEV_GPU_UTIL` the device's own series stays (pod labels
  empty) and every pod holding the device (a replica, a MIG instance or the whole GPU) gets a
  series of its own with labels `pod`, `namespace`, `container`, `pod_uid` and, on a replica
  `<UUID>::<n>`, `vgpu="<n>"`, valued with its own processes' memory (NVML bytes / 2^20) or SM %
  (0 for a holder with no process; no SM series on MIG, which DCGM does not report it for), the
  processes found by the pod UID in their cgroup path; other fields (`DCGM_FI_DEV_FB_FREE`) are
  copied onto each holder as in the copied form.

Figures: `DCGM_FI_DEV_FB_USED`/`_FREE` in MiB (a whole GPU's used memory includes what the driver
reserves), `DCGM_FI_DEV_GPU_UTIL` in % (the sum of its processes' SM %, at most 100; no series
for MIG instances, which DCGM does not report it for). Owns `DcgmExporterRuntime` (the kubelet's
view of the exporter's pods), `render` (the text) and `daemonset` (the DaemonSet a test or the
demo creates). Must not decide what is allocated.
"""

from __future__ import annotations

import contextlib
import http.server
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.kit.node.allocation import Allocation
from tests.kit.node.libnvml.symbols import InventorySymbols
from tests.kit.node.nodes import GpuView, SimNode
from tests.kit.plane.netns import NodeNetwork

Obj = dict[str, Any]
NAME = "nvidia-dcgm-exporter"
LABEL = {"app": NAME}
PORT = 9400
IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-ubuntu22.04"
VIRTUAL_GPUS_ENV = "KUBERNETES_VIRTUAL_GPUS"
MIB = 1 << 20
_POD_IN_CGROUP = re.compile(r"pod([a-f0-9_-]+)")
_HELP = {
    "DCGM_FI_DEV_GPU_UTIL": "GPU utilization (in %).",
    "DCGM_FI_DEV_FB_FREE": "Frame buffer memory free (in MiB).",
    "DCGM_FI_DEV_FB_USED": "Frame buffer memory used (in MiB).",
}


def daemonset(namespace: str = "gpu-operator", *, per_process: bool = False) -> Obj:
    """The exporter's DaemonSet as the GPU Operator renders it, on every GPU node."""
    env = [{"name": "DCGM_EXPORTER_LISTEN", "value": f":{PORT}"},
           {"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"}]  # fmt: skip
    if per_process:
        env.append({"name": VIRTUAL_GPUS_ENV, "value": "true"})
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": NAME, "namespace": namespace, "labels": dict(LABEL)},
        "spec": {
            "selector": {"matchLabels": dict(LABEL)},
            "template": {
                "metadata": {"labels": dict(LABEL)},
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.present": "true"},
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                    "hostPID": per_process,  # what per-process attribution needs
                    "containers": [
                        {
                            "name": NAME,
                            "image": IMAGE,
                            "env": env,
                            "ports": [{"name": "metrics", "containerPort": PORT}],
                        }
                    ],
                },
            },
        },
    }


def _container(pod: Obj) -> Obj | None:
    for container in (pod.get("spec") or {}).get("containers") or []:
        if "dcgm-exporter" in str(container.get("image") or ""):
            return dict(container)
    return None


def _per_process(container: Obj) -> bool:
    env = {e.get("name"): str(e.get("value", "")) for e in container.get("env") or []}
    return env.get(VIRTUAL_GPUS_ENV, "").lower() in ("true", "1", "yes")


@dataclass
class _Exporter:
    node: str
    pod_ip: str
    per_process: bool
    server: _Server | None = None
    thread: threading.Thread | None = None
    error: str | None = None


class DcgmExporterRuntime:
    """The exporter container of every exporter pod: a server in the node's namespace."""

    name = "dcgm-exporter"

    def __init__(
        self,
        nodes: Mapping[str, SimNode],
        networks: Mapping[str, NodeNetwork],
        allocations: Callable[[str], Sequence[Allocation]],
        proc_roots: Mapping[str, Path],
    ) -> None:
        self.nodes = nodes
        self.networks = networks
        self.allocations = allocations
        self.proc_roots = proc_roots
        self._running: dict[str, _Exporter] = {}
        self._lock = threading.Lock()

    def owns(self, pod: Obj) -> bool:
        return _container(pod) is not None

    def start(self, node: str, pod: Obj) -> None:
        container = _container(pod)
        assert container is not None
        pod_ip = str((pod.get("status") or {}).get("podIP") or "")
        exporter = _Exporter(node, pod_ip, _per_process(container))
        with self._lock:
            self._running[str(pod["metadata"]["uid"])] = exporter
        network = self.networks.get(node)
        sim = self.nodes.get(node)
        if network is None or sim is None or not sim.gpus or not pod_ip:
            exporter.error = f"node {node} has no GPUs in a network namespace to export"
            return
        network.add_address(pod_ip)
        listener = network.listen(pod_ip, PORT)
        exporter.server = _Server(listener, lambda: self.metrics(exporter))
        exporter.thread = threading.Thread(
            target=exporter.server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name=f"sim-dcgm-exporter-{node}",
            daemon=True,
        )
        exporter.thread.start()

    def stop(self, uid: str) -> None:
        with self._lock:
            exporter = self._running.pop(uid, None)
        if exporter is not None:
            self._end(exporter)

    def stop_all(self) -> None:
        with self._lock:
            every = list(self._running.values())
            self._running.clear()
        for exporter in every:
            self._end(exporter)

    def _end(self, exporter: _Exporter) -> None:
        if exporter.server is not None:
            exporter.server.shutdown()
            exporter.server.server_close()
        if exporter.thread is not None:
            exporter.thread.join(5)
        network = self.networks.get(exporter.node)
        if network is not None and exporter.pod_ip:
            network.remove_address(exporter.pod_ip)

    def fates(self, uid: str) -> dict[str, str | None]:
        with self._lock:
            exporter = self._running.get(uid)
        return {} if exporter is None else {NAME: exporter.error}

    def restart(self, uid: str, container: str) -> None:
        return None  # its only failure (no GPUs here) does not go away

    # ---- what it serves --------------------------------------------------------------------

    def metrics(self, exporter: _Exporter) -> str:
        sim = self.nodes[exporter.node]
        gpus = sim.gpu_views()
        owners = self._owners(exporter.node)
        return render(exporter.node, gpus, self.allocations(exporter.node), owners,
                      per_process=exporter.per_process)  # fmt: skip

    def _owners(self, node: str) -> dict[int, str]:
        """PID -> pod UID, from each process's cgroup file (`pod<uid>`, `_` read as `-`)."""
        root = self.proc_roots.get(node)
        owners: dict[int, str] = {}
        if root is None or not root.exists():
            return owners
        for entry in root.iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                found = _POD_IN_CGROUP.search((entry / "cgroup").read_text()[:16384])
                if found:
                    owners[int(entry.name)] = found.group(1).replace("_", "-")
        return owners


class _Server(http.server.ThreadingHTTPServer):
    """An HTTP server on a socket made elsewhere (inside a network namespace)."""

    daemon_threads = True

    def __init__(self, listener: Any, text: Callable[[], str]) -> None:
        super().__init__(listener.getsockname(), _Handler, bind_and_activate=False)
        self.socket.close()
        self.socket = listener
        self.text = text


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path.split("?", 1)[0] != "/metrics":
            self.send_error(404)
            return
        body = self.server.text().encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        return None


# ---- the text ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Device:
    gpu: GpuView
    uuid: str  # the GPU's, or the MIG device's
    gi_id: int | None
    profile: str
    total_mib: int


def _devices(gpu: GpuView) -> list[_Device]:
    if not gpu.mig_enabled:
        return [_Device(gpu, gpu.uuid, None, "", gpu.memory_mib)]
    return [_Device(gpu, m.uuid, m.gi_id, m.profile, m.memory_mb) for m in gpu.mig_devices]


def render(
    hostname: str,
    gpus: Sequence[GpuView],
    allocations: Sequence[Allocation],
    owners: Mapping[int, str],
    *,
    per_process: bool,
) -> str:
    """/metrics as dcgm-exporter writes it for this node."""
    series: dict[str, list[str]] = {name: [] for name in _HELP}
    holders: dict[str, list[tuple[Allocation, str | None]]] = {}
    for allocation in allocations:
        for device_id in allocation.device_ids:
            physical, _, replica = device_id.partition("::")
            holders.setdefault(physical, []).append((allocation, replica or None))
    for gpu in gpus:
        for device in _devices(gpu):
            gi_id = device.gi_id
            processes = [p for p in gpu.processes if gi_id is None or p.gpu_instance_id == gi_id]
            attributions = _attributions(device, holders, processes, owners, per_process)
            _device_series(series, _labels(hostname, device), gpu, device, processes, attributions)
    out: list[str] = []
    for name, lines in series.items():
        out += [f"# HELP {name} {_HELP[name]}", f"# TYPE {name} gauge", *lines]
    return "\n".join(out) + "\n"


def _device_series(
    series: dict[str, list[str]],
    base: Mapping[str, str],
    gpu: GpuView,
    device: _Device,
    processes: Sequence[Any],
    attributions: Sequence[tuple[dict[str, str], list[Any] | None]],
) -> None:
    """One device's lines: its own series where pods get their own figures, then one series
    per holder (own figures, or the device's copied)."""
    used = sum(p.used_memory for p in processes)
    if device.gi_id is None:
        used += gpu.memory_reserved
    util = min(100, sum(p.sm_percent or 0 for p in processes))
    free = max(0, device.total_mib - used // MIB)

    def add(name: str, labels: Mapping[str, str], value: int) -> None:
        if name != "DCGM_FI_DEV_GPU_UTIL" or device.gi_id is None:  # no SM figure on MIG
            series[name].append(_line(name, labels, value))

    if any(own is not None for _, own in attributions):  # the device's own series stays
        add("DCGM_FI_DEV_FB_USED", {**base, **UNHELD}, used // MIB)
        add("DCGM_FI_DEV_GPU_UTIL", {**base, **UNHELD}, util)
    for pod_labels, own in attributions:
        labels = {**base, **pod_labels}
        memory = used if own is None else sum(p.used_memory for p in own)
        add("DCGM_FI_DEV_FB_USED", labels, memory // MIB)
        add("DCGM_FI_DEV_FB_FREE", labels, free)
        add("DCGM_FI_DEV_GPU_UTIL", labels,
            util if own is None else min(100, sum(p.sm_percent or 0 for p in own)))  # fmt: skip


UNHELD = {"container": "", "namespace": "", "pod": ""}  # a series no pod is mapped to


def _attributions(
    device: _Device,
    holders: Mapping[str, Sequence[tuple[Allocation, str | None]]],
    processes: Sequence[Any],
    owners: Mapping[int, str],
    per_process: bool,
) -> list[tuple[dict[str, str], list[Any] | None]]:
    """(pod labels, the pod's own processes, or None where the device's figures are copied)."""
    held = holders.get(device.uuid, [])
    if not held:
        return [(dict(UNHELD), None)]
    rows: list[tuple[dict[str, str], list[Any] | None]] = []
    seen: set[tuple[str, str, str | None]] = set()
    for allocation, replica in held:
        key = (allocation.pod_uid, allocation.container, replica)
        if key in seen:
            continue
        seen.add(key)
        labels = {
            "container": allocation.container,
            "namespace": allocation.namespace,
            "pod": allocation.pod,
        }
        if per_process:
            labels["pod_uid"] = allocation.pod_uid
            if replica is not None:
                labels["vgpu"] = replica
            own = [p for p in processes if owners.get(p.pid) == allocation.pod_uid]
            rows.append((labels, own))
        else:
            rows.append((labels, None))
    return rows


def _labels(hostname: str, device: _Device) -> dict[str, str]:
    gpu = device.gpu
    labels = {
        "gpu": str(gpu.index),
        "UUID": gpu.uuid,
        "pci_bus_id": gpu.pci_bus_id,
        "device": f"nvidia{gpu.index}",
        "modelName": gpu.name,
    }
    if device.gi_id is not None:
        labels.update(GPU_I_PROFILE=device.profile, GPU_I_ID=str(device.gi_id))
    labels.update(Hostname=hostname, DCGM_FI_DRIVER_VERSION=InventorySymbols.driver_version)
    return labels


def _line(name: str, labels: Mapping[str, str], value: int) -> str:
    text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    return f"{name}{{{text}}} {value}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
