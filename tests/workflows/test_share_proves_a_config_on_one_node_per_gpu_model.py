"""`share` proves a config on one node per GPU model before the rest of that model restarts: the
first node of each (config key, `nvidia.com/gpu.product`) starts with no other node of its
pair and must stay Ready for the steady check; the others of a proven pair then fill the free
places at once. A config the plugin rejects stops the rollout after one node per model, not a
whole `--max-unavailable` batch; one that only one model rejects (MPS or a MIG strategy on a
model without it) is caught on that model's first node.

The static API of tests/workflows/conftest.py (the real kube-apiserver, no controllers) with six
one-GPU nodes of two models (one labelled `-SHARED`, as GFD labels a shared GPU: the same
model), four restarts allowed at once, and the node side played on the test's clock: a deleted
plugin pod is replaced by a new one that stays Ready, or, on a model that rejects the config,
shows Ready and crash-loops 1.5 s later (the plugin has no readiness probe:
docs/first-try-safety.md).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import pytest

from kubectl_gpu import cluster, keys
from kubectl_gpu.sharing import rollout
from kubectl_gpu.workflows.share import change
from kubectl_gpu.workflows.share.options import Options
from kubectl_gpu.workflows.waiting import Timing
from tests.kit.kube import layouts
from tests.kit.kube.client import KubeClient
from tests.kit.plane.helmplane import NAMESPACE, FakeClock, install, live_pods, pod
from tests.kit.plane.plane import ControlPlane
from tests.workflows.sharebuilders import gpu_node

H100, L4 = "NVIDIA-H100-80GB-HBM3", "NVIDIA-L4"
MODELS = {"gpu-0": H100, "gpu-1": H100, "gpu-2": L4, "gpu-3": H100, "gpu-4": L4, "gpu-5": L4}
# gpu-3 already shares its GPU (an earlier config): GFD's label says so, the model is the same
LABELS = {**MODELS, "gpu-3": f"{H100}-SHARED"}
PLUGIN = "nvidia-device-plugin-ctr"
CRASH_AFTER_S = 1.5


@pytest.fixture
def fleet(static_client: KubeClient, static_plane: ControlPlane) -> cluster.Api:
    layout = layouts.helm({"any": "version: v1\n"}, "any")
    install(static_client, layout)
    for name, label in LABELS.items():
        static_client.create(gpu_node(name, 1, extra={keys.GPU_PRODUCT_LABEL: label}))
        static_client.create(pod(f"plugin-{name}", name, layout.plugin_daemonset, PLUGIN))
        gfd = str(layout.gfd_daemonset)
        static_client.create(pod(f"gfd-{name}", name, gfd, "gpu-feature-discovery-ctr"))
    return cluster.connect(str(static_plane.kubeconfig))


class NodeSide:
    """Kubelet and the DaemonSet controller as time passes: a node whose plugin pod share
    deleted gets a new one `late[model]` seconds later."""

    def __init__(
        self, client: KubeClient, rejects: Collection[str] = (), late: Mapping[str, float] = {}
    ) -> None:
        self.client, self.rejects, self.late = client, rejects, late
        self.clock = FakeClock()
        self.deleted: dict[str, float] = {}  # node -> when its old plugin pod was seen gone
        self.came: dict[str, float] = {}  # node -> when its new plugin pod started
        self.crashed: set[str] = set()

    def sleep(self, seconds: float) -> None:
        self.clock.sleep(seconds)
        now, live = self.clock.now, {p["metadata"]["name"] for p in live_pods(self.client)}
        for node, model in MODELS.items():
            if f"plugin-{node}" not in live:
                self.deleted.setdefault(node, now)
            if node not in self.deleted:
                continue
            new = f"plugin-{node}-2"
            if node not in self.came and now - self.deleted[node] >= self.late.get(model, 0):
                self.client.create(pod(new, node, "nvdp-nvidia-device-plugin", PLUGIN))
                self.came[node] = now
            elif (
                model in self.rejects
                and node in self.came
                and node not in self.crashed
                and now - self.came[node] >= CRASH_AFTER_S
            ):
                self.crash(new)
                self.crashed.add(node)

    def crash(self, name: str) -> None:
        crashed = self.client.get("pods", name, NAMESPACE)
        crashed["status"] = {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [{
                "name": PLUGIN, "ready": False, "restartCount": 1, "image": "x", "imageID": "x",
                "state": {"waiting": {"reason": "CrashLoopBackOff",
                                      "message": "back-off 10s restarting"}},
            }],
        }  # fmt: skip
        self.client.update_status(crashed)


def share(api: cluster.Api, side: NodeSide) -> dict[str, str]:
    """`share --replicas 2 --max-unavailable 4`: each node's result."""
    options = Options(timeout=60, max_unavailable=4)
    timing = Timing(side.clock, side.sleep)
    result = change.share(api, rollout.ShareRequest(replicas=2), options, timing)
    return {r.node: r.result for r in result.nodes}


def test_a_rejected_config_stops_after_one_node_per_gpu_model(
    fleet: cluster.Api, static_client: KubeClient
) -> None:
    side = NodeSide(static_client, rejects={H100, L4})

    results = share(fleet, side)

    # each model's first node took the config and crashed; no other plugin was touched,
    # although four could have restarted at once
    assert results == {
        "gpu-0": "failed", "gpu-2": "failed", "gpu-1": "not-restarted",
        "gpu-3": "not-restarted", "gpu-4": "not-restarted", "gpu-5": "not-restarted",
    }  # fmt: skip
    assert sorted(side.deleted) == ["gpu-0", "gpu-2"]
    untouched = {p["metadata"]["name"] for p in live_pods(static_client)}
    assert {f"plugin-{n}" for n in ("gpu-1", "gpu-3", "gpu-4", "gpu-5")} <= untouched


def test_a_config_only_one_model_rejects_is_caught_on_that_models_first_node(
    fleet: cluster.Api, static_client: KubeClient
) -> None:
    side = NodeSide(static_client, rejects={L4})

    results = share(fleet, side)

    # the L4's first node crashed before the H100's passed its steady check: nothing more
    assert results == {
        "gpu-0": "restarted", "gpu-2": "failed", "gpu-1": "not-restarted",
        "gpu-3": "not-restarted", "gpu-4": "not-restarted", "gpu-5": "not-restarted",
    }  # fmt: skip
    assert sorted(side.deleted) == ["gpu-0", "gpu-2"]


def test_each_models_first_node_proves_the_config_for_that_model_alone(
    fleet: cluster.Api, static_client: KubeClient
) -> None:
    side = NodeSide(static_client, late={L4: 5.0})  # the L4s' new pods come 5 s late

    results = share(fleet, side)

    assert results == dict.fromkeys(MODELS, "restarted")
    deleted, came = side.deleted, side.came
    assert deleted["gpu-0"] == deleted["gpu-2"]  # the two proofs start together
    h100_proven, l4_proven = came["gpu-0"] + 3.0, came["gpu-2"] + 3.0
    # the other H100s start once the H100's proof was steady, without waiting for the L4's
    for node in ("gpu-1", "gpu-3"):
        assert h100_proven <= deleted[node] < l4_proven, (node, deleted, came)
    # the other L4s wait for their own model's proof
    for node in ("gpu-4", "gpu-5"):
        assert deleted[node] >= l4_proven, (node, deleted, came)
