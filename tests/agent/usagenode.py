"""A node for the usage endpoint's tests: NVML stand-in GPUs with processes, a host /proc of
cgroup files, and a kubelet stand-in holding the pods' devices (test code only)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubectl_gpu.agent import reporting, usagereading, usageserver
from tests.fakes import libnvml
from tests.fakes.kubelet import Allocatable, Container, Devices, FakeKubelet, Pod

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


@pytest.fixture
def usage_node(tmp_path: Path, fake_kubelet: FakeKubelet) -> Iterator[UsageNode]:
    lib = libnvml.FakeLibNvml(["H100-SXM5-80GB"])
    with libnvml.installed(lib):
        yield UsageNode(lib, tmp_path / "proc", fake_kubelet)


@pytest.fixture
def served(usage_node: UsageNode) -> Iterator[usageserver.UsageServer]:
    server = usageserver.UsageServer(("127.0.0.1", 0), usage_node.reader())
    server.serve_in_background()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
