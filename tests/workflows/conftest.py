"""The workflow tests' world: NVIDIA's Helm chart on the static plane (tests/kit/plane/
staticplane.py, helmplane.py) and the product's own client to it. Time is the test's own (a
fake clock, helmplane.FakeClock), so every wait ends at its deadline.

`api`: the chart's objects with two GPU nodes, a plugin and a GFD pod on each; the static
plane's clean-up after each test removes them."""

from __future__ import annotations

import pytest

from kubectl_gpu import cluster
from tests.kit.kube import layouts
from tests.kit.kube.client import KubeClient
from tests.kit.plane.helmplane import install, pod
from tests.kit.plane.plane import ControlPlane
from tests.workflows.sharebuilders import gpu_node


@pytest.fixture
def api(static_client: KubeClient, static_plane: ControlPlane) -> cluster.Api:
    """Helm's objects, two GPU nodes, a plugin and a GFD pod on each; no controllers."""
    layout = layouts.helm({"any": "version: v1\n"}, "any")
    install(static_client, layout)
    plugin, gfd = layout.plugin_daemonset, str(layout.gfd_daemonset)
    for name, gpus in (("gpu-a", 2), ("gpu-b", 1)):
        static_client.create(gpu_node(name, gpus))
        static_client.create(pod(f"plugin-{name}", name, plugin, "nvidia-device-plugin-ctr"))
        static_client.create(pod(f"gfd-{name}", name, gfd, "gpu-feature-discovery-ctr"))
    return cluster.connect(str(static_plane.kubeconfig))
