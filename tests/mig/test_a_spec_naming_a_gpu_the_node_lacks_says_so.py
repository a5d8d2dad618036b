"""`devices: [7]` on a node with GPUs 0 and 1: mig-parted walks the GPUs the node has, so the
entry selects nothing and nothing says so; the verdict names GPU 7 as missing, where before it
only said that GPUs 0 and 1 were not covered."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubectl_gpu.mig import models, verdicts
from kubectl_gpu.mig.nodes import NodeGpu, Target
from kubectl_gpu.mig.spec import MigConfigFile
from tests.conftest import CliResult

A100 = models.find("A100-80GB")[0]


def gpu(index: int) -> NodeGpu:
    return NodeGpu(index, A100.products[0].pci_device_id, A100.name, A100)


def config(devices: Any) -> Any:
    spec = {"devices": devices, "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}
    return MigConfigFile.from_dict({"version": "v1", "mig-configs": {"c": [spec]}}).select("c")


def test_an_index_the_node_lacks_is_named() -> None:
    result = verdicts.check("c", config([7]), Target("gpu-a", (gpu(0), gpu(1)), node="gpu-a"))

    assert not result.fits
    assert result.problems == (
        "spec #1 lists GPU 7, which does not exist on node gpu-a (its GPUs: 0, 1): it selects "
        "nothing there; use devices: all or existing indices",
    )


def test_indices_the_node_has_raise_nothing() -> None:
    result = verdicts.check("c", config([0, 1]), Target("gpu-a", (gpu(0), gpu(1)), node="gpu-a"))

    assert result.fits and result.problems == ()


def test_mig_validate_says_it(run_cli: Callable[..., CliResult], tmp_path: Path) -> None:
    path = tmp_path / "seven.yaml"
    path.write_text(
        "version: v1\nmig-configs:\n  seven:\n  - devices: [0, 7]\n    mig-enabled: true\n"
        "    mig-devices: {1g.10gb: 7}\n"
    )

    result = run_cli("mig", "validate", "-f", str(path), "--gpu", "A100-80GB", "--count", "2")

    assert result.exit_code == 1
    assert "spec #1 lists GPU 7, which does not exist on A100-80GB (its GPUs: 0, 1)" in (
        result.stdout
    )
