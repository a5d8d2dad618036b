"""`/proc/PID/cgroup` of a container's process as a node's kubelet and containerd leave it.

NVML reports host PIDs only ("you will always get the host pids", NVIDIA/nvidia-docker#1483), so
a reader maps a GPU process to its pod through the host's `/proc/PID/cgroup`, whose path names
the pod UID (dcgm-exporter's `internal/pkg/transformation/pidmapper.go` does so). The kubelet lays
the pod cgroups out by QoS class under `kubepods`, in one of two forms chosen by its cgroup driver:

- systemd (here with the unified cgroup v2 hierarchy, one `0::` line):
  `/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<UID, - as _>.slice/
  cri-containerd-<container ID>.scope` (Guaranteed pods sit right under `kubepods.slice`:
  `kubepods-pod<UID>.slice`);
- cgroupfs (here on a cgroup v1 host: one line per controller hierarchy, and the empty
  unified `0::/` line a hybrid host adds): `/kubepods/besteffort/pod<UID>/<container ID>`
  (Guaranteed: `/kubepods/pod<UID>/<container ID>`).

Owns those two forms, the pod's QoS class as the kubelet computes it (cpu and memory requests
and limits), a stable container ID per pod and container, and which driver a simulated node uses
(systemd on even node indexes, cgroupfs on odd ones, so a cluster of two GPU nodes has both).
Must not write files.
"""

from __future__ import annotations

import hashlib
from typing import Any

Obj = dict[str, Any]
DRIVERS = ("systemd", "cgroupfs")
_V1_CONTROLLERS = (
    "misc", "rdma", "pids", "hugetlb", "net_cls,net_prio", "perf_event", "cpuset", "devices",
    "memory", "blkio", "freezer", "cpu,cpuacct",
)  # fmt: skip


def driver_of(node_index: int) -> str:
    return DRIVERS[node_index % 2]


def container_id(pod_uid: str, container: str) -> str:
    """A containerd container ID (64 hex digits), the same for a pod's container every time."""
    return hashlib.sha256(f"{pod_uid}/{container}".encode()).hexdigest()


def qos_class(pod: Obj) -> str:
    """Guaranteed (every container: cpu and memory limits, requests equal to them), BestEffort
    (no cpu or memory request or limit anywhere), else Burstable. Extended resources such as
    nvidia.com/gpu do not count."""
    spec = pod.get("spec") or {}
    containers = (spec.get("containers") or []) + (spec.get("initContainers") or [])
    any_set = False
    guaranteed = bool(containers)
    for container in containers:
        resources = container.get("resources") or {}
        limits = resources.get("limits") or {}
        requests = {**limits, **(resources.get("requests") or {})}
        for kind in ("cpu", "memory"):
            if kind in limits or kind in requests:
                any_set = True
            if kind not in limits or str(requests.get(kind)) != str(limits[kind]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def container_path(driver: str, qos: str, pod_uid: str, cid: str) -> str:
    """The container's cgroup path under the driver's layout."""
    if driver == "systemd":
        uid = pod_uid.replace("-", "_")
        if qos == "Guaranteed":
            return f"/kubepods.slice/kubepods-pod{uid}.slice/cri-containerd-{cid}.scope"
        tier = qos.lower()
        return (
            f"/kubepods.slice/kubepods-{tier}.slice/kubepods-{tier}-pod{uid}.slice/"
            f"cri-containerd-{cid}.scope"
        )
    if driver == "cgroupfs":
        if qos == "Guaranteed":
            return f"/kubepods/pod{pod_uid}/{cid}"
        return f"/kubepods/{qos.lower()}/pod{pod_uid}/{cid}"
    raise ValueError(f"unknown cgroup driver {driver!r}; known: {', '.join(DRIVERS)}")


def proc_cgroup(driver: str, path: str) -> str:
    """The text of /proc/PID/cgroup for a process in cgroup `path` on a node with `driver`."""
    if driver == "systemd":
        return f"0::{path}\n"
    lines = [f"{n}:{c}:{path}" for n, c in zip(range(13, 1, -1), _V1_CONTROLLERS, strict=True)]
    return "\n".join([*lines, f"1:name=systemd:{path}", "0::/"]) + "\n"


def of_container(driver: str, pod: Obj, container: str) -> str:
    """/proc/PID/cgroup of a process in `container` of `pod`."""
    uid = str(pod["metadata"]["uid"])
    path = container_path(driver, qos_class(pod), uid, container_id(uid, container))
    return proc_cgroup(driver, path)
