"""The one request policy of `kubectl_gpu.cluster`, against the real kube-apiserver with one
fault injected at a time by a proxy in front of it: a read refused with 429 and Retry-After is
tried once more and then gets the real answer, a write refused with 503 is never repeated but
one turned away with 429 (flow control: it never ran) is sent again after Retry-After, a
server that hangs is given up on, and an absurd number in a real answer is counted as none,
as the scheduler counts it (never a traceback, never echoed)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubectl_gpu import cluster, errors
from tests.kit.plane.faults import Fault, FaultProxy
from tests.kit.plane.plane import ControlPlane
from tests.kit.plane.users import write_kubeconfig

pytestmark = pytest.mark.timeout(120)

NODE = "faulty-gpu-1"
KUBECTL_GPU = str(Path(sys.executable).parent / "kubectl-gpu")


@pytest.fixture(scope="module")
def proxy(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FaultProxy]:
    creds = control_plane.creds
    assert creds is not None
    capacity = {"cpu": "8", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "8"}
    node = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": NODE, "labels": {"nvidia.com/gpu.present": "true"}},
        "status": {"capacity": capacity, "allocatable": capacity},
    }  # fmt: skip
    subprocess.run(
        [str(control_plane.kubectl), "--kubeconfig", str(control_plane.kubeconfig),
         "create", "-f", "-"],
        input=json.dumps(node), capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    server = FaultProxy(control_plane.port, creds.serving_cert, creds.serving_key, creds.ca_cert)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        subprocess.run(
            [str(control_plane.kubectl), "--kubeconfig", str(control_plane.kubeconfig),
             "delete", "node", NODE, "--wait=false"], capture_output=True, check=False,
        )  # fmt: skip


@pytest.fixture
def kubeconfig(control_plane: ControlPlane, proxy: FaultProxy, tmp_path: Path) -> Path:
    creds = control_plane.creds
    assert creds is not None
    proxy.faults.clear()
    proxy.seen.clear()
    return write_kubeconfig(
        tmp_path / "kubeconfig",
        proxy.url,
        creds.ca_cert,
        {"token": creds.admin_token},
        user="admin",
    )


def node_path() -> str:
    return cluster.path("nodes", NODE)


def test_a_read_refused_with_429_is_tried_again_and_gets_the_real_answer(
    kubeconfig: Path, proxy: FaultProxy
) -> None:
    proxy.add(Fault("GET", f"/api/v1/nodes/{NODE}", status=429, retry_after=1))
    api = cluster.connect(str(kubeconfig))

    node = api.get(node_path())

    assert node["metadata"]["uid"]  # the real server's object
    tries = [s for s in proxy.seen if s.path.startswith(f"/api/v1/nodes/{NODE}")]
    assert [s.faulted for s in tries] == [True, False]


def test_a_write_refused_with_503_is_not_repeated(kubeconfig: Path, proxy: FaultProxy) -> None:
    proxy.add(Fault("PATCH", f"/api/v1/nodes/{NODE}", status=503, retry_after=1))
    api = cluster.connect(str(kubeconfig))

    with pytest.raises(errors.ClusterError) as refused:
        api.patch(node_path(), {"metadata": {"labels": {"kubectl-gpu.io/test": "x"}}})

    assert refused.value.status == 503
    assert [s.method for s in proxy.seen if s.path.startswith(f"/api/v1/nodes/{NODE}")] == ["PATCH"]
    labels = cluster.connect(str(kubeconfig)).get(node_path())["metadata"].get("labels", {})
    assert "kubectl-gpu.io/test" not in labels  # nothing reached the real server


def test_a_write_turned_away_with_429_is_sent_again_and_lands(
    kubeconfig: Path, proxy: FaultProxy
) -> None:
    proxy.add(Fault("PATCH", f"/api/v1/nodes/{NODE}", status=429, retry_after=1, times=2))
    api = cluster.connect(str(kubeconfig))

    api.patch(node_path(), {"metadata": {"labels": {"kubectl-gpu.io/test": "throttled"}}})

    tries = [s for s in proxy.seen if s.path.startswith(f"/api/v1/nodes/{NODE}")]
    assert [(s.method, s.faulted) for s in tries] == [("PATCH", True)] * 2 + [("PATCH", False)]
    labels = api.get(node_path())["metadata"].get("labels", {})
    assert labels.get("kubectl-gpu.io/test") == "throttled"  # the third try reached the server
    api.patch(node_path(), {"metadata": {"labels": {"kubectl-gpu.io/test": None}}})


def test_a_server_that_hangs_is_given_up_on(kubeconfig: Path, proxy: FaultProxy) -> None:
    proxy.add(Fault("GET", f"/api/v1/nodes/{NODE}", hang=8, times=2))
    api = cluster.connect(str(kubeconfig), timeout=2)

    with pytest.raises(errors.ClusterError):
        api.get(node_path())


def test_an_absurd_gpu_count_in_a_real_answer_is_not_echoed_or_fatal(
    kubeconfig: Path, proxy: FaultProxy
) -> None:
    absurd = "9" * 5000

    def inflate(body: bytes) -> bytes:
        obj = json.loads(body)
        for item in obj.get("items", [obj]):
            if item.get("metadata", {}).get("name") == NODE:
                item["status"]["allocatable"]["nvidia.com/gpu"] = absurd
                item["status"]["capacity"]["nvidia.com/gpu"] = absurd
        return json.dumps(obj).encode()

    proxy.add(Fault("GET", "/api/v1/nodes", rewrite=inflate, times=20))

    done = subprocess.run(
        [KUBECTL_GPU, "--kubeconfig", str(kubeconfig), "doctor"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip

    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert absurd not in done.stderr  # named, not echoed
    # doctor counts an unreadable amount as the scheduler does (none) and says so per node
    assert f"GPU node {NODE} advertises no GPUs" in done.stdout


def test_a_resource_the_server_does_not_serve_is_named_not_quoted(kubeconfig: Path) -> None:
    # kube-apiserver answers a path no API group routes with the text "404 page not found"
    # (no Status): the error must say which resource is missing and how to look, not echo it
    api = cluster.connect(str(kubeconfig))
    unserved = "/apis/not-installed.example.com/v1/widgets"

    with pytest.raises(errors.ClusterError) as missing:
        api.get(unserved)

    assert missing.value.status == 404
    assert "page not found" not in missing.value.message
    assert f"GET {unserved}: this API server does not serve that resource" in missing.value.message
    assert "kubectl api-resources" in missing.value.hint
