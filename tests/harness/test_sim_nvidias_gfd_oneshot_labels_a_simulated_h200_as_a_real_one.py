"""NVIDIA's GFD v0.19.3, unmodified, run once in a simulated node's sandbox over the project's
libnvidia-ml.so.1 in strict mode (an NVML call the library does not implement aborts it): on an
H200 it writes exactly the labels it wrote on a real H200 (tests/data/nvidia/), on MIG devices
it needs nothing the library lacks, and MPS on MIG devices stops it with its reason (what the
GFD pod's log then shows). Before the library answered `nvmlDeviceGetGpuFabricInfoV` strict mode
stopped it there; before the sandbox gave the node's PCI functions it wrote `gpu.mode=unknown`
and no `vgpu.present`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.kit.kube import builds
from tests.kit.node import sandbox
from tests.kit.node.libnvml.driver import DriverRoot, lay_out
from tests.kit.node.nodes import NodeSpec, SimNode

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(sandbox.unavailable() is not None, reason=str(sandbox.unavailable())),
]
READING = Path(__file__).resolve().parents[1] / "data" / "nvidia"


def run_once(tmp_path: Path, spec: NodeSpec, *flags: str) -> tuple[dict[str, str], DriverRoot]:
    """GFD's labels for a node of `spec` (`--oneshot`, to a file), and the node's driver root."""
    done, root = run(tmp_path, spec, *flags)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    output = tmp_path / "labels"
    return dict(line.split("=", 1) for line in output.read_text().split()), root


def run(
    tmp_path: Path, spec: NodeSpec, *flags: str
) -> tuple[subprocess.CompletedProcess[str], DriverRoot]:
    """One `--oneshot` run of GFD in the sandbox of a node of `spec`, strict mode on."""
    node = SimNode(spec, 0)
    root = lay_out(tmp_path / "driver")
    node.share_state(root.state)
    root.strict()
    root.trace()
    output = tmp_path / "labels"
    argv = [
        str(builds.program("gpu-feature-discovery")),
        "--oneshot", "--use-node-feature-api=false", "--no-timestamp",
        f"--output-file={output}", f"--driver-root-ctr-path={root.path}",
        f"--machine-type-file={tmp_path / 'no-dmi'}", *flags,
    ]  # fmt: skip
    env = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "NODE_NAME": spec.name,
           "LD_LIBRARY_PATH": str(root.lib_dir)}  # fmt: skip
    done = subprocess.run(  # noqa: S603 (fixed argv, no shell)
        sandbox.Sandbox(tmp_path).command(argv), env=env, capture_output=True, text=True,
        timeout=90, check=False,
    )  # fmt: skip
    return done, root


def test_an_h200_gets_exactly_the_labels_a_real_h200_got(tmp_path: Path) -> None:
    labels, root = run_once(tmp_path, NodeSpec("h200-node", "H200-SXM-141GB", 1))
    text = (READING / "h200-driver-580.159.04-gfd-v0.19.3-labels.txt").read_text()
    assert labels == dict(line.split("=", 1) for line in text.split())
    assert root.unimplemented() == []
    assert "nvmlDeviceGetGpuFabricInfoV" in root.calls()


@pytest.mark.parametrize(
    ("spec", "strategy", "wanted"),
    [
        pytest.param(
            NodeSpec("n", "H100-SXM5-80GB", 2, mig={0: ["3g.40gb", "2g.20gb", "1g.10gb"]}),
            "mixed",
            {"nvidia.com/mig-3g.40gb.count": "1", "nvidia.com/gpu.count": "2"},
            id="mixed",
        ),
        pytest.param(
            NodeSpec("n", "A100-SXM4-40GB", 1, mig={0: ["1g.5gb"] * 7}),
            "single",
            {
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
                "nvidia.com/gpu.count": "7",
                "nvidia.com/gpu.memory": "4864",
            },
            id="single",
        ),  # fmt: skip
        pytest.param(
            NodeSpec("n", "H100-SXM5-80GB", 2, mig={0: ["3g.40gb", "1g.10gb"]}),
            "single",
            {
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-INVALID",
                "nvidia.com/gpu.count": "0",
                "nvidia.com/gpu.replicas": "0",
                "nvidia.com/gpu.memory": "0",
                # an empty sharing-strategy beside an invalid layout's product (the retired
                # Python stand-in wrote `none` here)
                "nvidia.com/gpu.sharing-strategy": "",
            },
            id="single-invalid",
        ),  # fmt: skip
    ],
)
def test_mig_devices_need_nothing_the_library_lacks(
    tmp_path: Path, spec: NodeSpec, strategy: str, wanted: dict[str, str]
) -> None:
    labels, root = run_once(tmp_path, spec, f"--mig-strategy={strategy}")
    assert {k: labels.get(k) for k in wanted} == wanted
    assert labels["nvidia.com/mig.strategy"] == strategy
    assert root.unimplemented() == []
    assert "nvmlDeviceGetMigDeviceHandleByIndex" in root.calls()


def test_mps_on_mig_devices_stops_gfd_with_its_reason(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "version: v1\nflags:\n  migStrategy: mixed\nsharing:\n  mps:\n    resources:\n"
        "    - name: nvidia.com/gpu\n      replicas: 4\n"
    )
    spec = NodeSpec("n", "H100-SXM5-80GB", 1, mig={0: ["1g.10gb"]})
    done, _ = run(tmp_path, spec, f"--config-file={config}")
    assert done.returncode == 1
    reason = "failed to check MPS-capable: MPS sharing is not supported for mig devices"
    assert reason in done.stdout + done.stderr
