"""`map` and `doctor` read DRA allocations that Kubernetes' own scheduler made.

The DRA driver's side is what NVIDIA's kubelet plugin publishes (its DeviceClasses and one
ResourceSlice per node, tests/fakes/cluster/dradriver.py); everything after that is real: the
controller-manager creates claims from templates, the scheduler allocates devices by the
classes' CEL selectors (whole GPUs, a MIG partition drawing on its GPU's counters, an
`nvidia.com/gpu` limit served by DRA, KEP-5004), and KWOK runs the pods. What `map` prints is
compared with the allocation the server holds, never with a result written by a test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane.plane import ControlPlane, wait_for
from tests.fakes.cluster import dradriver
from tests.fakes.cluster.dradriver import DraGpu, MigSlot

pytestmark = pytest.mark.timeout(180)

KUBECTL_GPU = str(Path(sys.executable).parent / "kubectl-gpu")
NS = "dra-map"
Obj = dict[str, Any]


def uuid(prefix: str, n: int) -> str:
    return f"{prefix}-{n:08x}-aaaa-bbbb-cccc-dddddddddddd"


WHOLE = [uuid("GPU", 700 + i) for i in range(2)]
PARTITIONED = uuid("GPU", 750)
MIGS = [uuid("MIG", 751), uuid("MIG", 752)]
NODES = {
    "dra-real-1": [DraGpu(0, WHOLE[0]), DraGpu(1, WHOLE[1])],
    "dra-real-2": [
        DraGpu(
            0,
            PARTITIONED,
            migs=(MigSlot("3g.40gb", MIGS[0], 40, 42), MigSlot("1g.10gb", MIGS[1], 10, 14)),
        )
    ],
}


def run(
    binary: str | Path, kubeconfig: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(binary), "--kubeconfig", str(kubeconfig), *args],
        input=stdin, capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip


def node(name: str) -> Obj:
    capacity = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def pod(name: str, *, node_name: str, claims: list[Obj] | None = None, gpus: int = 0) -> Obj:
    container: Obj = {"name": "main", "image": "cuda"}
    spec: Obj = {"containers": [container], "nodeSelector": {"kubernetes.io/hostname": node_name}}
    if claims:
        spec["resourceClaims"] = claims
        container["resources"] = {"claims": [{"name": c["name"]} for c in claims]}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


def claim_spec(requests: list[Obj]) -> Obj:
    return {"devices": {"requests": requests}}


class Cluster:
    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane

    def kubectl(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return run(self.plane.kubectl, self.plane.kubeconfig, *args, stdin=stdin)

    def create(self, obj: Obj) -> None:
        done = self.kubectl("create", "-f", "-", stdin=json.dumps(obj))
        assert done.returncode == 0, done.stderr

    def get(self, *args: str) -> Any:
        done = self.kubectl("get", *args, "-o", "json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def gpu(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run(KUBECTL_GPU, self.plane.kubeconfig, *args)

    def running(self, name: str) -> bool:
        return bool(self.get("pod", "-n", NS, name).get("status", {}).get("phase") == "Running")


# Partitionable devices (a MIG partition drawing on its GPU's counters) and extended resources
# served by DRA (KEP-5004) are alpha and off before Kubernetes 1.36.
BETA_DRA = "partitionable devices and nvidia.com/gpu through DRA are alpha, off, before 1.36"


def recent(plane: ControlPlane) -> bool:
    return tuple(int(n) for n in plane.version.split(".")) >= (1, 36)


@pytest.fixture(scope="module")
def dra(control_plane: ControlPlane) -> Iterator[Cluster]:
    c = Cluster(control_plane)
    nodes = NODES if recent(control_plane) else {"dra-real-1": NODES["dra-real-1"]}
    for name in nodes:
        c.create(node(name))
    c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    for obj in dradriver.device_classes("v1"):
        c.create(obj)
    for name, gpus in nodes.items():
        for obj in dradriver.resource_slices(name, gpus, "v1"):
            c.create(obj)
    c.create({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": NS},
        "spec": {"spec": claim_spec(
            [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}])},
    })  # fmt: skip
    c.create(pod("train", node_name="dra-real-1",
                 claims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]))  # fmt: skip
    if not recent(control_plane):
        wait_for("train Running on the real scheduler's allocation", lambda: c.running("train"))
        yield c
        _clean(c)
        return
    c.create({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "small-slice", "namespace": NS},
        "spec": claim_spec([{"name": "mig", "exactly": {
            "deviceClassName": "mig.nvidia.com",
            "selectors": [{"cel": {"expression":
                "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}],
        }}]),
    })  # fmt: skip
    c.create(pod("infer", node_name="dra-real-2",
                 claims=[{"name": "mig", "resourceClaimName": "small-slice"}]))  # fmt: skip
    c.create(pod("legacy-style", node_name="dra-real-1", gpus=1))
    for name in ("train", "infer", "legacy-style"):
        wait_for(f"{name} Running on the real scheduler's allocation", lambda n=name: c.running(n))
    try:
        yield c
    finally:
        _clean(c)


def _clean(c: Cluster) -> None:
    c.kubectl("delete", "namespace", NS, "--wait=false")
    for name in NODES:
        c.kubectl("delete", "node", name, "--wait=false")
    c.kubectl("delete", "resourceslices", "--all", "--wait=false")
    c.kubectl("delete", "deviceclasses", "--all", "--wait=false")


def allocated_devices(c: Cluster, pod_name: str) -> list[Obj]:
    """What the scheduler wrote into the pod's claims: driver, pool, device."""
    pod = c.get("pod", "-n", NS, pod_name)
    made = {
        s["name"]: s.get("resourceClaimName")
        for s in pod["status"].get("resourceClaimStatuses") or []
    }
    names = [
        r.get("resourceClaimName") or made.get(r["name"])
        for r in pod["spec"].get("resourceClaims") or []
    ]
    extended = pod["status"].get("extendedResourceClaimStatus")
    if extended:
        names.append(extended["resourceClaimName"])
    found = []
    for name in names:
        claim = c.get("resourceclaim", "-n", NS, name)
        found += claim["status"]["allocation"]["devices"]["results"]
    return found


def device_uuid(node_name: str, device: str) -> str:
    for gpu in NODES[node_name]:
        if not gpu.migs and device == f"gpu-{gpu.index}":
            return gpu.uuid
        for n, slot in enumerate(gpu.migs):
            if device == f"gpu-{gpu.index}-mig-{slot.profile.replace('.', '')}-{n}":
                return slot.uuid
    raise AssertionError(f"no device {device} on {node_name}")


def map_rows(c: Cluster) -> dict[str, Obj]:
    done = c.gpu("map", "-A", "-o", "json")
    assert done.returncode == 0, done.stderr
    return {r["pod"]: r for r in json.loads(done.stdout)["items"] if r.get("namespace") == NS}


def test_a_claim_from_a_template_is_shown_on_the_gpu_the_scheduler_chose(dra: Cluster) -> None:
    results = allocated_devices(dra, "train")
    assert len(results) == 1 and results[0]["driver"] == "gpu.nvidia.com"
    chosen = device_uuid("dra-real-1", results[0]["device"])

    row = map_rows(dra)["train"]

    assert (row["plane"], row["node"], row["gpu_uuid"]) == ("dra", "dra-real-1", chosen)


def test_a_mig_partition_is_shown_under_its_parent_gpu(dra: Cluster) -> None:
    if not recent(dra.plane):
        pytest.skip(BETA_DRA)
    results = allocated_devices(dra, "infer")
    assert device_uuid("dra-real-2", results[0]["device"]) == MIGS[1]  # the only 1g.10gb

    row = map_rows(dra)["infer"]

    assert (row["gpu_uuid"], row["mig_uuid"], row["mig_profile"]) == (
        PARTITIONED,
        MIGS[1],
        "1g.10gb",
    )


def test_an_nvidia_gpu_limit_served_by_dra_is_shown_with_its_claim(dra: Cluster) -> None:
    """KEP-5004: the scheduler itself makes the claim for the limit, from the class's
    extendedResourceName; map names the container and the GPU."""
    if not recent(dra.plane):
        pytest.skip(BETA_DRA)
    results = allocated_devices(dra, "legacy-style")
    assert len(results) == 1
    other = device_uuid("dra-real-1", results[0]["device"])

    row = map_rows(dra)["legacy-style"]

    assert (row["plane"], row["gpu_uuid"], row["container"]) == ("dra", other, "main")
    assert other != map_rows(dra)["train"]["gpu_uuid"]  # two claims never get one whole GPU


def test_doctor_names_the_selector_no_published_device_satisfies(dra: Cluster) -> None:
    dra.create({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "h200", "namespace": NS},
        "spec": claim_spec([{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.nvidia.com",
            "selectors": [{"cel": {"expression":
                "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'"}}],
        }}]),
    })  # fmt: skip
    dra.create(
        pod(
            "wants-h200",
            node_name="dra-real-1",
            claims=[{"name": "gpu", "resourceClaimName": "h200"}],
        )
    )
    wait_for(
        "the scheduler to give up on wants-h200",
        lambda: any(
            c.get("reason") == "Unschedulable"
            for c in dra.get("pod", "-n", NS, "wants-h200")["status"].get("conditions", [])
        ),
    )

    done = dra.gpu("doctor", "-n", NS, "wants-h200")

    assert done.returncode == 1, done.stdout + done.stderr
    assert "dra" in done.stdout
    assert "NVIDIA H200" in done.stdout
