"""The dcgm-exporter stand-in answers through the pod proxy in both forms dcgm-exporter has.

Two pods time-slice one GPU with different memory. By default dcgm-exporter copies the device's
figures to every pod sharing it (dcgm-exporter #307/#587): both pods show the GPU's whole memory.
With `KUBERNETES_VIRTUAL_GPUS` (4.5.3-4.8.2 and later) each pod gets its replica (`vgpu`), its
UID (`pod_uid`) and its own processes' memory and utilization, and the device's own series stays
beside them with empty pod labels, as that release's podmapper writes them. A reader must be able
to tell the two apart.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.kit.cluster import NodeSpec
from tests.kit.cluster.fixture import MakeSimCluster, kubectl_for
from tests.kit.plane import netns

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.timeout(120),
    pytest.mark.skipif(netns.unavailable() is not None, reason=str(netns.unavailable())),
]
REPLICAS_4 = (
    "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
    "    - name: nvidia.com/gpu\n      replicas: 4\n"
)


def pod(name: str, memory: str, sm: str) -> str:
    notes = {"sim.kubectl-gpu.io/gpu-memory": memory, "sim.kubectl-gpu.io/sm-percent": sm}
    return json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": notes},
        "spec": {"nodeName": "gpu-a", "containers": [
            {"name": "server", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
             "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
    })  # fmt: skip


def series(text: str, metric: str) -> dict[str, tuple[dict[str, str], int]]:
    """pod -> (labels, value) of `metric`'s series."""
    found = {}
    for line in text.splitlines():
        if line.startswith(metric + "{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            found[labels["pod"]] = (labels, int(line.rsplit(" ", 1)[1]))
    return found


@pytest.mark.parametrize("form", ["copied", "per-process"])
def test_time_sliced_pods_get_copies_or_their_own_figures(
    sim_cluster: MakeSimCluster, tmp_path: Path, form: str
) -> None:
    cluster = sim_cluster(
        [NodeSpec("gpu-a", "L4", 1, labels={"nvidia.com/device-plugin.config": "replicas-4"})],
        layout="gpu-operator", configs={"replicas-4": REPLICAS_4}, default_config="replicas-4",
        node_networks=True, gpu_processes=True, dcgm_exporter=form,
    )  # fmt: skip
    kubectl = kubectl_for(cluster, tmp_path)
    for manifest in (pod("small", "2Gi", "10"), pod("big", "9Gi", "70")):
        assert kubectl("apply", "-f", "-", stdin=manifest).returncode == 0
    cluster.settle()
    exporter = cluster.store.list("pods", "gpu-operator", label_selector="app=nvidia-dcgm-exporter")
    assert len(exporter) == 1
    path = (
        f"/api/v1/namespaces/gpu-operator/pods/{exporter[0]['metadata']['name']}:9400/proxy/metrics"
    )
    got = kubectl("get", "--raw", path)
    assert got.returncode == 0, got.stderr
    memory = series(got.stdout, "DCGM_FI_DEV_FB_USED")
    util = series(got.stdout, "DCGM_FI_DEV_GPU_UTIL")
    gpu = cluster.node_gpus("gpu-a")[0]
    whole = (gpu.memory_reserved + 11 * (1 << 30)) >> 20
    if form == "copied":
        assert set(memory) == {"small", "big"}
        assert {p: v for p, (_, v) in memory.items()} == {"small": whole, "big": whole}
        assert {p: v for p, (_, v) in util.items()} == {"small": 80, "big": 80}
        assert all("vgpu" not in labels for labels, _ in memory.values())
    else:  # "" is the device's own series, kept beside the pods' own
        assert {p: v for p, (_, v) in memory.items()} == {"small": 2048, "big": 9216, "": whole}
        assert {p: v for p, (_, v) in util.items()} == {"small": 10, "big": 70, "": 80}
        replicas = {memory[p][0]["vgpu"] for p in ("small", "big")}
        assert len(replicas) == 2 and replicas <= {"0", "1", "2", "3"}
        uids = {p: kubectl("get", "pod", p, "-o", "jsonpath={.metadata.uid}").stdout
                for p in ("small", "big")}  # fmt: skip
        assert {p: memory[p][0]["pod_uid"] for p in ("small", "big")} == uids
    labels = memory["big"][0]
    assert (labels["UUID"], labels["Hostname"], labels["namespace"]) == (
        gpu.uuid,
        "gpu-a",
        "default",
    )
    assert labels["modelName"] == gpu.name
