"""`share` rewrites the keys it edits with PyYAML: key order and the comments that open a key
are kept; comments inside it cannot be (PyYAML has no model of them), and a warning says so.

On the real control plane: the ConfigMap's text is what the real server stored and returns."""

from __future__ import annotations

import logging

import pytest

from kubectl_gpu import cluster
from kubectl_gpu.sharing import rollout
from kubectl_gpu.workflows.share import change
from kubectl_gpu.workflows.share.options import Options
from tests.kit.cluster import NodeSpec
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import layouts

NAMESPACE, CONFIGMAP = "nvidia-device-plugin", "nvdp-nvidia-device-plugin-configs"
EDITED = """# Owned by the platform team: ask #gpu-infra before changing.
# Reviewed 2026-11-01.
version: v1
flags:
  migStrategy: none  # no MIG on these nodes
  failOnInitError: true
"""


def test_opening_comments_and_key_order_survive_an_edit(
    sim_cluster: MakeSimCluster,
    caplog: pytest.LogCaptureFixture,
) -> None:
    real = sim_cluster([NodeSpec("gpu-a", "L4", 1)], layouts.helm({"any": EDITED}, "any"))
    api = cluster.connect(str(real.kubeconfig))

    with caplog.at_level(logging.WARNING, logger="kubectl_gpu"):
        change.share(api, rollout.ShareRequest(replicas=2), Options(restart=False))

    text = real.client.get("configmaps", CONFIGMAP, NAMESPACE)["data"]["any"]
    assert text.startswith("# Owned by the platform team: ask #gpu-infra before changing.\n")
    assert text.index("version:") < text.index("flags:") < text.index("sharing:")
    assert text.index("migStrategy") < text.index("failOnInitError")
    assert "key any: 1 comment line(s) inside the config are not kept" in caplog.text
