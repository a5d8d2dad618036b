"""A value of the wrong type inside an API object (labels as a list, `metadata: null`, a
GPUNodeReport's `gpus: "x"`) is a clear error naming the object and the field, exit 1, or the
object is skipped with a warning naming it where the command can go on; never an internal
error (exit 70). Strings from the API (a node name with a bidi override or a lone surrogate)
reach the terminal escaped. The real server's answers are rewritten by the fault proxy (the
real server's own validation would refuse such objects: a proxy, a webhook or a broken
aggregated API can still send them)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubectl_gpu import cluster
from kubectl_gpu.errors import ClusterError
from tests.conftest import CliResult
from tests.gpumap import reportbuilders as b
from tests.kit.plane.faults import Fault, FaultProxy
from tests.kit.plane.plane import ControlPlane

pytestmark = pytest.mark.usefixtures("real_control_plane")
NODE = "gpu-typed"
NODES = "/api/v1/nodes"
REPORTS = "/apis/kubectl-gpu.io/v1/gpunodereports"


@pytest.fixture(scope="module")
def a_gpu_node(module_plane: ControlPlane, fault_proxy: FaultProxy) -> Iterator[None]:
    assert module_plane.creds is not None
    api = cluster.connect(str(module_plane.kubeconfig))
    try:
        b.install(api)
    except ClusterError as e:
        if e.status != 409:
            raise
    api.create(
        cluster.path("nodes"), b.objects.node(NODE, labels={"nvidia.com/gpu.present": "true"})
    )
    gpus = b.gpus(1)
    b.publish_node(api, NODE, gpus, [b.held("train", [gpus[0].uuid])])
    yield


def _first_item(change: Callable[[dict[str, Any]], None]) -> Callable[[bytes], bytes]:
    def rewrite(body: bytes) -> bytes:
        document = json.loads(body)
        items = [i for i in document.get("items") or [] if i["metadata"]["name"] == NODE]
        for item in items:
            change(item)
        return json.dumps(document).encode()

    return rewrite


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    *parents, last = path.split(".")

    def change(item: dict[str, Any]) -> None:
        where = item
        for key in parents:
            where = where.setdefault(key, {})
        where[last] = value

    return change


NODE_FAULTS = {
    "labels-as-list": (_set("metadata.labels", ["nvidia.com/gpu.present"]), "labels"),
    "metadata-null": (_set("metadata", None), "metadata"),
    "annotations-as-string": (_set("metadata.annotations", "x"), "annotations"),
    "capacity-as-list": (_set("status.capacity", ["nvidia.com/gpu"]), "capacity"),
}
COMMANDS = [["map"], ["share", "show"], ["doctor"], ["status"], ["mig", "status"]]


@pytest.mark.usefixtures("a_gpu_node")
@pytest.mark.parametrize("fault", NODE_FAULTS, ids=list(NODE_FAULTS))
@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_a_node_field_of_the_wrong_type_is_named_not_a_crash(
    run_cli: Callable[..., CliResult],
    proxied_kubeconfig: Path,
    fault_proxy: FaultProxy,
    command: list[str],
    fault: str,
) -> None:
    change, field = NODE_FAULTS[fault]
    fault_proxy.add(Fault("GET", NODES, rewrite=_first_item(change), times=20))

    result = run_cli(*command, "--kubeconfig", str(proxied_kubeconfig))

    assert result.exit_code in (0, 1), result.stderr
    assert result.exception is None
    assert "internal error" not in result.stderr
    if any(s.faulted for s in fault_proxy.seen):  # it read the node (share show stops sooner)
        assert result.exit_code == 1
        shown = f"node '{NODE}'" if fault != "metadata-null" else "node number "
        assert f"{shown}" in result.stderr and "from GET /api/v1/nodes cannot be read: " in (
            result.stderr
        )
        assert field in result.stderr, result.stderr


REPORT_FAULTS = {
    "gpus-as-string": (_set("status.gpus", "x"), "gpus"),
    "gpu-as-number": (_set("status.gpus", [7]), "gpus"),
    "metadata-null": (_set("metadata", None), "metadata"),
}


@pytest.mark.usefixtures("a_gpu_node")
@pytest.mark.parametrize("fault", REPORT_FAULTS, ids=list(REPORT_FAULTS))
@pytest.mark.parametrize("output", ["table", "wide", "json"])
def test_a_report_of_the_wrong_shape_is_named_not_a_crash(
    run_cli: Callable[..., CliResult],
    proxied_kubeconfig: Path,
    fault_proxy: FaultProxy,
    fault: str,
    output: str,
) -> None:
    change, field = REPORT_FAULTS[fault]
    fault_proxy.add(Fault("GET", REPORTS, rewrite=_first_item(change), times=20))

    result = run_cli("map", "-o", output, "--kubeconfig", str(proxied_kubeconfig))

    assert result.exit_code in (0, 1), result.stderr
    assert "internal error" not in result.stderr
    assert field in result.stderr, result.stderr


@pytest.mark.usefixtures("a_gpu_node")
@pytest.mark.parametrize("command", [["map"], ["share", "show"], ["map", "-o", "wide"]])
def test_names_from_the_api_reach_the_terminal_escaped(
    run_cli: Callable[..., CliResult],
    proxied_kubeconfig: Path,
    fault_proxy: FaultProxy,
    command: list[str],
) -> None:
    hostile = "gpu-\u202eexe.\ud800\x1b[2J"
    for path in (NODES, REPORTS):
        fault_proxy.add(
            Fault("GET", path, rewrite=_first_item(_set("metadata.name", hostile)), times=20)
        )

    result = run_cli(*command, "--kubeconfig", str(proxied_kubeconfig))

    assert result.exit_code in (0, 1), result.stderr
    shown = result.stdout + result.stderr
    for raw in ("\u202e", "\ud800", "\x1b"):
        assert raw not in shown
    if "gpu-" in shown:
        assert "\\u202e" in shown or "\\ud800" in shown
