"""A node for the usage endpoint's tests: NVML stand-in GPUs with processes, a host /proc of
cgroup files, and a kubelet stand-in holding the pods' devices (test code only)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from kubectl_gpu.agent import reporting, usagereading
from tests.kit.node import libnvml
from tests.kit.node.kubelet import Allocatable, Container, Devices, FakeKubelet, Pod

MIB = 2**20


def systemd_cgroup(uid: str, container_id: str) -> str:
    """A cgroup v2 file of a containerd container under the systemd driver."""
    slice_uid = uid.replace("-", "_")
    return (
        "0::/kubepods.slice/kubepods-burstable.slice/"
        f"kubepods-burstable-pod{slice_uid}.slice/cri-containerd-{container_id}.scope\n"
    )


@dataclasses.dataclass
class UsageNode:
    """One simulated node: `lib` (NVML), `proc` (host /proc), `kubelet`."""

    lib: libnvml.FakeLibNvml
    proc: Path
    kubelet: FakeKubelet

    def process(
        self,
        gpu: int,
        pid: int,
        mib: int,
        cgroup: str,
        sm: int | None = None,
        mig: tuple[int, int] | None = None,
    ) -> None:
        """A compute process on GPU `gpu` whose host /proc/<pid>/cgroup reads `cgroup`."""
        self.lib.add_process(gpu, pid, used_mib=mib, mig_device=mig, sm_percent=sm)
        (self.proc / str(pid)).mkdir(parents=True, exist_ok=True)
        (self.proc / str(pid) / "cgroup").write_text(cgroup)

    def reader(self) -> usagereading.UsageReader:
        sources = reporting.Sources("gpu-node-1", self.kubelet.root, timeout=5.0)
        return usagereading.UsageReader(usagereading.UsageSources(sources, self.proc))


def time_sliced(kubelet: FakeKubelet, gpu_uuid: str, pods: dict[str, tuple[str, int]]) -> None:
    """Pods name → (UID, replica) each holding one replica of `gpu_uuid` (4 advertised)."""
    resource = "nvidia.com/gpu"
    kubelet.set_pods(
        Pod(name, "default", (Container("main", (Devices(resource, (f"{gpu_uuid}::{r}",)),)),), uid)
        for name, (uid, r) in pods.items()
    )
    kubelet.set_allocatable(
        Allocatable((Devices(resource, tuple(f"{gpu_uuid}::{i}" for i in range(4))),))
    )
    kubelet.write_checkpoint()
