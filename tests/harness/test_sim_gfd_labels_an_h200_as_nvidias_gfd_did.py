"""The simulated GFD labels an H200 node as NVIDIA's GPU Feature Discovery v0.19.3 labelled a
real one (tests/data/nvidia/: `gpu-feature-discovery --oneshot` on a lent H200, driver
580.159.04), and kubectl-gpu reads those real labels as that node's GPUs.

Before this reading the stand-in wrote an older driver than the node's NVML library reports and
left out five labels GFD writes (`cuda.driver-version.{major,minor,revision}`,
`cuda.runtime-version.{major,minor}`, `gpu.machine`, `vgpu.present`).
"""

from __future__ import annotations

from pathlib import Path

from kubectl_gpu.mig import nodes
from tests.fakes.cluster import gfd, pluginconfig
from tests.fakes.cluster.nodes import NodeSpec, SimNode

READING = (
    Path(__file__).resolve().parents[1]
    / "data" / "nvidia" / "h200-driver-580.159.04-gfd-v0.19.3-labels.txt"
)  # fmt: skip


def _real() -> dict[str, str]:
    return dict(line.split("=", 1) for line in READING.read_text().split())


def test_the_stand_in_writes_every_label_gfd_wrote_with_its_value() -> None:
    node = SimNode(NodeSpec("h200-node", "H200-SXM-141GB", 1), 0)
    ours = gfd.labels_for(node.gpu_views(), pluginconfig.load(None, {}, gfd=True))
    assert ours == _real()


def test_kubectl_gpu_reads_the_real_labels_as_one_h200() -> None:
    target = nodes.node_target("h200-node", _real())
    assert [(g.index, g.model.key if g.model else None) for g in target.gpus] == [(0, "H200-141GB")]
