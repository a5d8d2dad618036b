"""NVIDIA's device plugin v0.19.3 under `sharing.mps` serves a GPU's replicas only while the
node's MPS control daemon answers (internal/plugin/mps.go): the simulated node leaves the files a
running daemon leaves (tests/kit/node/mps.py), and without the daemon's control entry the
plugin says why in its log and advertises nothing, as on a node whose daemon is down."""

from __future__ import annotations

import pytest

from tests.kit.cluster import NodeSpec
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.node import mps

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(180)]

MPS_3 = """version: v1
sharing:
  mps:
    resources:
    - name: nvidia.com/gpu
      replicas: 3
"""


def test_mps_replicas_are_served_only_while_the_control_daemon_answers(
    sim_cluster: MakeSimCluster,
) -> None:
    cluster = sim_cluster(
        [NodeSpec("gpu-1", "H100-SXM5-80GB", 1)], layout="helm", configs={"mps": MPS_3}
    )
    assert cluster.allocatable("gpu-1") == 3
    said = cluster.plugin_log("gpu-1")
    assert 'MPS daemon is healthy" resource="nvidia.com/gpu"' in said

    control = mps.control(cluster.sides["gpu-1"].dir / "mps", "nvidia.com/gpu")
    control.unlink()  # the MPS control daemon is gone
    cluster.restart_plugin("gpu-1")
    assert cluster.allocatable("gpu-1") == 0
    assert cluster.capacity("gpu-1") == 3  # the kubelet keeps what a gone plugin advertised
    said = cluster.plugin_log("gpu-1")
    assert "error waiting for MPS daemon: error checking MPS daemon health" in said
    assert "Retrying in 30s" in said
