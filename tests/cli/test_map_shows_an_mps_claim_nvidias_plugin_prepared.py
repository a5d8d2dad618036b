"""A pod whose ResourceClaim asks for MPS sharing runs on a DRA node served by NVIDIA's own DRA
kubelet plugin v0.4.1 (its `MPSSupport` gate on, as the chart's `featureGates` would set it), and
`kubectl gpu map` shows the claim on its physical GPU with the MPS settings in effect; `kubectl
gpu doctor` finds nothing wrong with the pod or the MPS control daemon NVIDIA's plugin started.

NVIDIA's prepare does the work (docs/simulated-dra.md): it renders the image's
`/templates/mps-control-daemon.tmpl.yaml` (the node's sandbox shows the project's own,
tests/kit/node/mpstemplate.py), mounts a tmpfs for the daemon's shared memory in its own mount
namespace, sets the GPU's compute mode through the driver root's `nvidia-smi`, creates the
Deployment `mps-control-daemon-<claim UID>-<hash>` in the driver's namespace (the chart's Role
lets it) and waits for its pod, bound to the claim's node, to be Ready; only then does the
kubelet stand-in let the claim's pod run. Unprepare deletes the Deployment and the mount."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult, eventually
from tests.kit.cluster import NodeSpec, SimCluster, drachart
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.node import sandbox

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(sandbox.unavailable() is not None, reason=str(sandbox.unavailable())),
]
Run = Callable[..., CliResult]
Obj = dict[str, Any]
NS = "ml"
MPS = {
    "apiVersion": "resource.nvidia.com/v1beta1",
    "kind": "GpuConfig",
    "sharing": {
        "strategy": "MPS",
        "mpsConfig": {
            "defaultActiveThreadPercentage": 50,
            "defaultPinnedDeviceMemoryLimit": "10Gi",
        },
    },
}


def create_claim_and_pod(cluster: SimCluster) -> None:
    client = cluster.client
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    client.create({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "shared", "namespace": NS},
        "spec": {"devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}],
            "config": [{"requests": ["gpu"],
                        "opaque": {"driver": "gpu.nvidia.com", "parameters": MPS}}]}},
    })  # fmt: skip
    client.create({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "infer", "namespace": NS},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": "dra-1"},
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": "shared"}],
                 "containers": [{"name": "main", "image": "cuda:12",
                                 "resources": {"claims": [{"name": "gpu"}]}}]},
    })  # fmt: skip


def phase(cluster: SimCluster, pod: str) -> str | None:
    return (cluster.client.get("pods", pod, NS).get("status") or {}).get("phase")


def daemons(cluster: SimCluster) -> list[Obj]:
    found = cluster.client.list("deployments", namespace=drachart.NAMESPACE)
    return [d for d in found if d["metadata"]["name"].startswith("mps-control-daemon-")]


def daemon_pods(cluster: SimCluster) -> list[Obj]:
    found = cluster.client.list("pods", namespace=drachart.NAMESPACE)
    return [p for p in found if p["metadata"]["name"].startswith("mps-control-daemon-")]


def tmpfs_mounts(pid: int) -> list[str]:
    """The tmpfs mount points NVIDIA's process sees (its own mount namespace)."""
    lines = Path(f"/proc/{pid}/mountinfo").read_text(encoding="utf-8").splitlines()
    return [line.split()[4] for line in lines if " - tmpfs shm " in line]


def test_an_mps_claim_nvidias_plugin_prepared_runs_and_is_mapped_to_its_gpu(
    sim_cluster: MakeSimCluster, run_cli: Run
) -> None:
    cluster = sim_cluster(
        [NodeSpec("dra-1", "A100-SXM4-80GB", 2, dra=True)], dra_feature_gates=["MPSSupport=true"]
    )
    create_claim_and_pod(cluster)
    assert cluster.dra is not None and cluster.dra_kubelet is not None

    assert eventually(lambda: phase(cluster, "infer") == "Running", 120), (
        cluster.dra_kubelet.errors, cluster.dra.log("dra-1")[-15:]
    )  # fmt: skip
    claim = cluster.client.get("resourceclaims", "shared", NS)
    [result] = claim["status"]["allocation"]["devices"]["results"]
    gpu = next(g for g in cluster.node_gpus("dra-1") if g.minor_number == int(
        result["device"].removeprefix("gpu-")))  # fmt: skip
    # NVIDIA's plugin started the claim's MPS control daemon on the claim's node, for its GPU
    [daemon] = daemons(cluster)
    assert daemon["metadata"]["name"].startswith(f"mps-control-daemon-{claim['metadata']['uid']}-")
    [daemon_pod] = daemon_pods(cluster)
    assert daemon_pod["spec"]["nodeName"] == "dra-1"
    assert daemon_pod["spec"]["serviceAccountName"] == drachart.SERVICE_ACCOUNT
    [container] = daemon_pod["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["CUDA_VISIBLE_DEVICES"] == gpu.uuid
    script = container["command"][-1]  # the claim's settings, as NVIDIA's plugin rendered them
    assert "set_default_active_thread_percentage 50 " in script
    assert f"set_default_device_pinned_mem_limit {gpu.uuid} 10240M " in script
    pid = cluster.dra.pid("dra-1")
    assert pid is not None
    [shm] = tmpfs_mounts(pid)  # the daemon's shared memory, in the plugin's mount namespace only
    assert shm.endswith("/shm") and "/gpu.nvidia.com/mps/" in shm
    assert shm in {(v.get("hostPath") or {}).get("path") for v in daemon_pod["spec"]["volumes"]}

    kubeconfig = str(cluster.kubeconfig)
    mapped = run_cli("--kubeconfig", kubeconfig, "map", "-A", "-o", "json")

    assert mapped.exit_code == 0, mapped.stderr
    [row] = [r for r in mapped.json["items"] if r["pod"] == "infer"]
    assert (row["plane"], row["node"], row["container"]) == ("dra", "dra-1", "main")
    assert row["gpu_uuid"] == gpu.uuid
    assert row["sharing"] == "MPS (50% SMs, 10Gi pinned)"
    assert not [r for r in mapped.json["items"] if r["pod"].startswith("mps-control-daemon-")]
    wide = run_cli("--kubeconfig", kubeconfig, "map", "-A", "-o", "wide")
    assert "MPS (50% SMs, 10Gi pinned)" in wide.stdout

    doctor = run_cli("--kubeconfig", kubeconfig, "doctor", "infer", "-n", NS, "-o", "json")

    assert doctor.exit_code == 0, doctor.stdout
    serious = [d for d in doctor.json["diagnoses"] if d["severity"] in ("error", "warning")]
    assert not serious, serious
    whole = run_cli("--kubeconfig", kubeconfig, "doctor", "-o", "json")
    assert whole.exit_code == 0, whole.stdout
    named = [d for d in whole.json["diagnoses"] if "mps-control-daemon" in str(d)]
    assert not [d for d in named if d["severity"] in ("error", "warning")], named

    # the pod gone, NVIDIA's unprepare stops the daemon and unmounts its shared memory
    cluster.client.delete("pods", "infer", NS)
    assert eventually(lambda: not daemons(cluster), 60), cluster.dra.log("dra-1")[-15:]
    assert eventually(lambda: not tmpfs_mounts(pid), 30)
