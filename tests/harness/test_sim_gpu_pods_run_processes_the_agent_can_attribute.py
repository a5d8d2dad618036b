"""A running GPU pod's processes are on its node as a node agent finds them on a real node.

What `kubectl gpu top`'s agent reads: NVML's compute processes (host PIDs, memory, the MIG
instance they run in, per-process SM % samples — not supported on MIG-enabled GPUs) and the
host's `/proc/PID/cgroup`, whose kubelet cgroup path names the pod UID (systemd form on one node,
cgroupfs on the other). Read here through pynvml over the node's shared NVML state, as the agent
process does. The memory and SM % are the pod's test-only annotations
(`sim.kubectl-gpu.io/gpu-memory`, `sim.kubectl-gpu.io/sm-percent`); the device is the one the
device plugin handed out (a time-slice replica, a MIG device) or the real scheduler allocated from
a DRA ResourceSlice; a process of no pod is added by hand; everything of a pod goes when the pod
is deleted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pynvml
import pytest

from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster, kubectl_for
from tests.kit.node import libnvml, sandbox
from tests.kit.node.libnvml.device import NOT_AVAILABLE
from tests.kit.node.libnvml.statefile import GpuStateFile, load_library

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(120)]
GIB = 1 << 30
CONFIGS = {
    "default": "version: v1\nflags:\n  migStrategy: mixed\n",
    "replicas-4": "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
    "    - name: nvidia.com/gpu\n      replicas: 4\n",
}


def pod(name: str, node: str, resource: str, memory: str, sm: str | None = None) -> str:
    notes = {"sim.kubectl-gpu.io/gpu-memory": memory}
    if sm is not None:
        notes["sim.kubectl-gpu.io/sm-percent"] = sm
    return json.dumps({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": notes},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "cuda", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                            "resources": {"limits": {resource: "1"}}}],
        },
    })  # fmt: skip


@contextmanager
def node_nvml(cluster: SimCluster, node: str) -> Iterator[None]:
    """pynvml over the node's NVML state, as the node's agent process loads it."""
    state = cluster.gpu_state(node)
    assert state is not None
    with libnvml.installed(load_library(GpuStateFile(state))):
        pynvml.nvmlInit()
        try:
            yield
        finally:
            pynvml.nvmlShutdown()


def processes(index: int) -> dict[int, tuple[int, int, int]]:
    """pid -> (bytes, GPU instance ID, compute instance ID) on GPU `index`."""
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    return {
        p.pid: (p.usedGpuMemory, p.gpuInstanceId, p.computeInstanceId)
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
    }


def pod_uid_in(cgroup: str) -> str:
    found = re.search(r"pod([0-9a-f_-]{36})", cgroup)
    assert found, cgroup
    return found.group(1).replace("_", "-")


def test_gpu_pods_processes_appear_with_their_memory_instance_and_cgroup_and_go_with_them(
    sim_cluster: MakeSimCluster, tmp_path: Path
) -> None:
    cluster = sim_cluster(
        [NodeSpec("gpu-ts", "L4", 1), NodeSpec("gpu-mig", "A100-SXM4-80GB", 1,
                                                 mig={0: ["3g.40gb", "3g.40gb"]})],
        layout="helm", configs=CONFIGS, default_config="default", agents=True,
        gpu_processes=True,
    )  # fmt: skip
    kubectl = kubectl_for(cluster, tmp_path)
    labelled = kubectl("label", "node", "gpu-ts", "nvidia.com/device-plugin.config=replicas-4")
    assert labelled.returncode == 0, labelled.stderr
    cluster.settle()
    for manifest in (
        pod("small", "gpu-ts", "nvidia.com/gpu", "2Gi", "15"),
        pod("big", "gpu-ts", "nvidia.com/gpu", "12Gi", "60"),
        pod("sliced", "gpu-mig", "nvidia.com/mig-3g.40gb", "20Gi", "50"),
    ):
        applied = kubectl("apply", "-f", "-", stdin=manifest)
        assert applied.returncode == 0, applied.stderr
    cluster.settle()
    uids = {n: cluster.store.get("pods", n, "default")["metadata"]["uid"]
            for n in ("small", "big", "sliced")}  # fmt: skip
    stray = cluster.add_stray_process("gpu-ts", 0, 3 * GIB, sm_percent=5)

    by_pod = {p.pod: p for p in cluster.gpu_processes("gpu-ts") + cluster.gpu_processes("gpu-mig")}
    assert set(by_pod) == {"small", "big", "sliced", ""}
    with node_nvml(cluster, "gpu-ts"):
        found = processes(0)
        assert found[by_pod["small"].pid][0] == 2 * GIB
        assert found[by_pod["big"].pid][0] == 12 * GIB
        assert found[stray.pid][0] == 3 * GIB
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        sm = {s.pid: s.smUtil for s in pynvml.nvmlDeviceGetProcessUtilization(handle, 0)}
        assert sm == {by_pod["small"].pid: 15, by_pod["big"].pid: 60, stray.pid: 5}
    given = next(a.device_ids[0] for a in cluster.allocations("gpu-mig") if a.pod == "sliced")
    with node_nvml(cluster, "gpu-mig"):
        used, gi, _ = processes(0)[by_pod["sliced"].pid]
        assert used == 20 * GIB
        gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
        instances = {}
        for j in range(2):
            device = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, j)
            instances[pynvml.nvmlDeviceGetUUID(device)] = pynvml.nvmlDeviceGetGpuInstanceId(device)
        assert instances[given] == gi  # the MIG device the plugin handed the pod
        with pytest.raises(pynvml.NVMLError_NotSupported):  # NVML: not on MIG-enabled GPUs
            pynvml.nvmlDeviceGetProcessUtilization(gpu, 0)

    # the host's /proc of each node names the pod's UID, in that node's cgroup driver's form
    for node, name in (("gpu-ts", "small"), ("gpu-ts", "big"), ("gpu-mig", "sliced")):
        text = (cluster.proc_root(node) / str(by_pod[name].pid) / "cgroup").read_text()
        assert pod_uid_in(text) == uids[name]
    small = (cluster.proc_root("gpu-ts") / str(by_pod["small"].pid) / "cgroup").read_text()
    sliced = (cluster.proc_root("gpu-mig") / str(by_pod["sliced"].pid) / "cgroup").read_text()
    assert small.startswith("0::/kubepods.slice/kubepods-besteffort.slice/")  # systemd
    assert "memory:/kubepods/besteffort/pod" in sliced  # cgroupfs
    stray_text = (cluster.proc_root("gpu-ts") / str(stray.pid) / "cgroup").read_text()
    assert "pod" not in stray_text

    assert kubectl("delete", "pod", "big", "sliced", "--wait=false").returncode == 0
    cluster.settle()
    assert {p.pod for p in cluster.gpu_processes("gpu-ts")} == {"small", ""}
    assert not (cluster.proc_root("gpu-ts") / str(by_pod["big"].pid)).exists()
    with node_nvml(cluster, "gpu-ts"):
        assert set(processes(0)) == {by_pod["small"].pid, stray.pid}
    with node_nvml(cluster, "gpu-mig"):
        assert processes(0) == {}


@pytest.mark.skipif(sandbox.unavailable() is not None, reason=str(sandbox.unavailable()))
def test_a_pod_with_a_dra_claim_runs_its_process_on_the_allocated_gpu(
    sim_cluster: MakeSimCluster, tmp_path: Path
) -> None:
    """The node runs NVIDIA's DRA kubelet plugin, whose ResourceSlice names each GPU's UUID."""
    node = NodeSpec("gpu-d", "L4", 2, dra=True)
    cluster = sim_cluster([node], agents=True, gpu_processes=True)
    gpus = cluster.node_gpus("gpu-d")
    cluster.store.create({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "second-gpu", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.nvidia.com",
            "selectors": [{"cel": {"expression":
                f"device.attributes['gpu.nvidia.com'].uuid == '{gpus[1].uuid}'"}}]}}]}},
    })  # fmt: skip
    kubectl = kubectl_for(cluster, tmp_path)
    manifest = json.loads(pod("claimant", "gpu-d", "cpu", "6Gi", "25"))
    container = manifest["spec"]["containers"][0]
    container["resources"] = {"claims": [{"name": "gpu"}]}
    manifest["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "second-gpu"}]
    del manifest["spec"]["nodeName"]  # the scheduler places it, allocating the claim on the way
    applied = kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    assert applied.returncode == 0, applied.stderr
    cluster.settle()
    uid = cluster.store.get("pods", "claimant", "default")["metadata"]["uid"]
    (process,) = cluster.gpu_processes("gpu-d")
    assert (process.pod, process.gpu_index, process.sm_percent) == ("claimant", 1, 25)
    with node_nvml(cluster, "gpu-d"):
        assert processes(0) == {}
        assert processes(1) == {process.pid: (6 * GIB, NOT_AVAILABLE, NOT_AVAILABLE)}
    text = (cluster.proc_root("gpu-d") / str(process.pid) / "cgroup").read_text()
    assert pod_uid_in(text) == uid
