"""kubectl-gpu reads the labels NVIDIA's GPU Feature Discovery v0.19.3 wrote on a real H200
(tests/data/nvidia/: `gpu-feature-discovery --oneshot` on a lent H200, driver 580.159.04) as that
node's one H200. That NVIDIA's GFD writes the same labels on a simulated H200 is
tests/harness/test_sim_nvidias_gfd_oneshot_labels_a_simulated_h200_as_a_real_one.py.
"""

from __future__ import annotations

from pathlib import Path

from kubectl_gpu.mig import nodes

READING = (
    Path(__file__).resolve().parents[1]
    / "data" / "nvidia" / "h200-driver-580.159.04-gfd-v0.19.3-labels.txt"
)  # fmt: skip


def test_kubectl_gpu_reads_the_real_labels_as_one_h200() -> None:
    labels = dict(line.split("=", 1) for line in READING.read_text().split())
    target = nodes.node_target("h200-node", labels)
    assert [(g.index, g.model.key if g.model else None) for g in target.gpus] == [(0, "H200-141GB")]
