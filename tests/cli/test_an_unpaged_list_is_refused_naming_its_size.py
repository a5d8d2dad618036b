"""Memory stays bounded whatever the answer's size: lists are read page by page (`limit`), a
page of large objects past the page bound is asked again in smaller pages, and a server that
ignores `limit` (a proxy in front of it dropping the parameter) is refused with the answer's
size named, instead of a command growing past a gigabyte decoding it. On the real control
plane, the oversized answers made by the fault proxy from the real server's own list."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult
from tests.kit.plane.faults import Fault, FaultProxy

pytestmark = pytest.mark.usefixtures("real_control_plane")
NODES = "/api/v1/nodes"


def big_node(i: int) -> dict[str, Any]:
    """A node of about 14 KB, as real GPU nodes with many images and annotations are."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"gpu-{i:05d}",
            "labels": {"nvidia.com/gpu.present": "true", "kubernetes.io/hostname": f"gpu-{i}"},
            "annotations": {f"example.com/note-{k}": "x" * 200 for k in range(40)},
        },
        "spec": {},
        "status": {
            "capacity": {"nvidia.com/gpu": "8", "cpu": "96"},
            "allocatable": {"nvidia.com/gpu": "8", "cpu": "96"},
            "images": [
                {"names": [f"registry.example.com/img-{k}:v1"], "sizeBytes": 1} for k in range(80)
            ],
        },
    }


def unpaged(count: int) -> Callable[[bytes], bytes]:
    """The real answer, with `count` large nodes and no `continue`: `limit` ignored."""

    def rewrite(body: bytes) -> bytes:
        document = json.loads(body)
        document["items"] = [big_node(i) for i in range(count)]
        document.setdefault("metadata", {}).pop("continue", None)
        return json.dumps(document).encode()

    return rewrite


@pytest.mark.parametrize(
    "command",
    [["map"], ["doctor"], ["mig", "status"]],
    ids=["map", "doctor", "mig-status"],
)
def test_a_list_the_server_does_not_page_is_refused_naming_its_size(
    run_cli: Callable[..., CliResult],
    proxied_kubeconfig: Path,
    fault_proxy: FaultProxy,
    command: list[str],
) -> None:
    fault_proxy.add(Fault("GET", NODES, rewrite=unpaged(1500), times=10))

    result = run_cli(*command, "--kubeconfig", str(proxied_kubeconfig))

    assert result.exit_code == 1 and result.exception is None, result.stderr
    assert "GET /api/v1/nodes?limit=50: a page of at most 50 items from the API server" in (
        result.stderr
    )
    assert "is larger than 16 MiB (21." in result.stderr
    assert " MB), the most a page may hold: the server does not page this list" in result.stderr
    limits = [s.path.split("limit=")[1].split("&")[0] for s in fault_proxy.seen if NODES in s.path]
    assert limits[:2] == ["500", "50"]  # asked again in small pages before refusing


def test_a_page_of_large_objects_is_asked_again_in_smaller_pages(
    run_cli: Callable[..., CliResult], proxied_kubeconfig: Path, fault_proxy: FaultProxy
) -> None:
    fault_proxy.add(Fault("GET", NODES, rewrite=unpaged(1500), times=1))  # only the first page

    result = run_cli("map", "--kubeconfig", str(proxied_kubeconfig))

    assert result.exit_code == 0, result.stderr
    asked = [s.path for s in fault_proxy.seen if s.path.startswith(NODES + "?")]
    assert "limit=500" in asked[0] and "limit=50&" in asked[1] + "&"
