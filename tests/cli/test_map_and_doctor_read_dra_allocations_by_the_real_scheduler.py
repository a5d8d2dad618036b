"""`map` and `doctor` read DRA allocations that Kubernetes' own scheduler made.

The DRA driver's side is NVIDIA's own: its kubelet plugin v0.4.1 on each simulated DRA node
publishes the node's ResourceSlice (the chart's DeviceClasses beside it,
tests/kit/node/draplugin.py); everything after that is real too: the controller-manager
creates claims from templates, the scheduler allocates devices by the classes' CEL selectors
(whole GPUs, an existing MIG device of a MIG-enabled GPU, an `nvidia.com/gpu` limit served by
DRA, KEP-5004), and KWOK runs the pods. What `map` prints is compared with the allocation the
server holds and the node's own GPUs, never with a result written by a test. (Partitionable
counters come only with the driver's alpha DynamicMIG gate: docs/simulated-dra.md.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.node import sandbox
from tests.kit.plane.plane import ControlPlane, wait_for

pytestmark = pytest.mark.timeout(180)

KUBECTL_GPU = str(Path(sys.executable).parent / "kubectl-gpu")
NS = "dra-map"
Obj = dict[str, Any]


NODES = {
    "dra-real-1": NodeSpec("dra-real-1", "A100-SXM4-80GB", 2, dra=True),
    "dra-real-2": NodeSpec(
        "dra-real-2", "A100-SXM4-80GB", 1, dra=True, mig={0: ("3g.40gb", "1g.10gb")}
    ),
}


def run(
    binary: str | Path, kubeconfig: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(binary), "--kubeconfig", str(kubeconfig), *args],
        input=stdin, capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip


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
    def __init__(self, plane: ControlPlane, sim: SimCluster) -> None:
        self.plane = plane
        self.sim = sim

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
def dra(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if sandbox.unavailable() is not None:
        pytest.skip(str(sandbox.unavailable()))
    from tests.kit.plane import sharedplane

    sharedplane.reset()
    nodes = NODES if recent(control_plane) else {"dra-real-1": NODES["dra-real-1"]}
    kubeconfig = tmp_path_factory.mktemp("dra") / "kubeconfig"
    sim = SimCluster(list(nodes.values()), controllers=(), plane=control_plane,
                     kubeconfig=kubeconfig).start()  # fmt: skip
    c = Cluster(control_plane, sim)
    try:
        yield from _with_pods(c)
    finally:
        sim.stop()
        sharedplane.reset()


def _with_pods(c: Cluster) -> Iterator[Cluster]:
    control_plane = c.plane
    c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
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
    yield c


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


def device_uuid(c: Cluster, node_name: str, device: str) -> str:
    """The UUID the node's own NVML gives the device NVIDIA's plugin named `device`:
    `gpu-<minor>` or `gpu-<minor>-mig-<profile>-<profile ID>-<placement start>`."""
    for view in c.sim.nodes[node_name].gpu_views():
        if not view.mig_enabled and device == f"gpu-{view.index}":
            return view.uuid
        for mig in view.mig_devices:
            if device.startswith(f"gpu-{view.index}-mig-{mig.profile.replace('.', '')}-"):
                return mig.uuid
    raise AssertionError(f"no device {device} on {node_name}")


def map_rows(c: Cluster) -> dict[str, Obj]:
    done = c.gpu("map", "-A", "-o", "json")
    assert done.returncode == 0, done.stderr
    return {r["pod"]: r for r in json.loads(done.stdout)["items"] if r.get("namespace") == NS}


def test_a_claim_from_a_template_is_shown_on_the_gpu_the_scheduler_chose(dra: Cluster) -> None:
    results = allocated_devices(dra, "train")
    assert len(results) == 1 and results[0]["driver"] == "gpu.nvidia.com"
    chosen = device_uuid(dra, "dra-real-1", results[0]["device"])

    row = map_rows(dra)["train"]

    assert (row["plane"], row["node"], row["gpu_uuid"]) == ("dra", "dra-real-1", chosen)


def test_a_mig_partition_is_shown_under_its_parent_gpu(dra: Cluster) -> None:
    if not recent(dra.plane):
        pytest.skip(BETA_DRA)
    results = allocated_devices(dra, "infer")
    [view] = dra.sim.nodes["dra-real-2"].gpu_views()
    [small] = [m.uuid for m in view.mig_devices if m.profile == "1g.10gb"]
    assert device_uuid(dra, "dra-real-2", results[0]["device"]) == small  # the only 1g.10gb

    row = map_rows(dra)["infer"]

    assert (row["gpu_uuid"], row["mig_uuid"], row["mig_profile"]) == (view.uuid, small, "1g.10gb")


def test_an_nvidia_gpu_limit_served_by_dra_is_shown_with_its_claim(dra: Cluster) -> None:
    """KEP-5004: the scheduler itself makes the claim for the limit, from the class's
    extendedResourceName; map names the container and the GPU."""
    if not recent(dra.plane):
        pytest.skip(BETA_DRA)
    results = allocated_devices(dra, "legacy-style")
    assert len(results) == 1
    other = device_uuid(dra, "dra-real-1", results[0]["device"])

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
