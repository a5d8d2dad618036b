"""A share rollout stopped mid-way (Ctrl-C, an API failure, its --timeout) says what it wrote and
which plugins it restarted, and `share rollback` undoes it; --timeout bounds the whole rollout;
a change whose rollback record cannot be kept is refused before anything is written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from kubectl_gpu import cluster, errors, keys
from kubectl_gpu.sharing import rollout
from kubectl_gpu.workflows.share import change
from kubectl_gpu.workflows.share.options import Options
from kubectl_gpu.workflows.share.show import show
from kubectl_gpu.workflows.waiting import Timing
from tests.kit.kube import layouts
from tests.kit.kube.client import KubeClient
from tests.kit.plane.helmplane import (
    NAMESPACE,
    FakeClock,
    install,
    live_pods,
    pod,
)
from tests.kit.plane.plane import ControlPlane
from tests.workflows.sharebuilders import gpu_node

CONFIGMAP = "nvdp-nvidia-device-plugin-configs"


def _text(client: KubeClient) -> dict[str, Any]:
    return dict(client.get("configmaps", CONFIGMAP, NAMESPACE))


class Interrupting(FakeClock):
    """Ctrl-C during the first wait of the rollout."""

    def sleep(self, seconds: float) -> None:
        raise KeyboardInterrupt


class Recreating(FakeClock):
    """A DaemonSet that brings a deleted plugin pod back `delay` seconds later (under a new
    name, as a DaemonSet's pods have: the old one may still be Terminating)."""

    def __init__(self, client: KubeClient, delay: float) -> None:
        super().__init__()
        self.client, self.delay, self.gone_since = client, delay, dict[str, float]()

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        names = {p["metadata"]["name"] for p in live_pods(self.client)}
        for node in ("gpu-a", "gpu-b"):
            if not any(n.startswith(f"plugin-{node}") for n in names):
                since = self.gone_since.setdefault(node, self.now - seconds)
                if self.now - since >= self.delay:
                    plugin = "nvdp-nvidia-device-plugin"
                    self.client.create(
                        pod(f"plugin-{node}-new", node, plugin, "nvidia-device-plugin-ctr")
                    )
                    del self.gone_since[node]


def test_ctrl_c_mid_rollout_says_what_was_written_and_rollback_undoes_it(
    api: cluster.Api, static_client: KubeClient
) -> None:
    clock = Interrupting()

    with pytest.raises(errors.GpuError) as stopped:
        change.share(api, rollout.ShareRequest(replicas=2), Options(), Timing(clock, clock.sleep))

    e = stopped.value
    assert e.exit_code == errors.ExitCode.INTERRUPTED
    assert f"interrupted after writing ConfigMap {NAMESPACE}/{CONFIGMAP}" in e.message
    # read back from the cluster: gpu-a's plugin pod was deleted before the Ctrl-C, so it
    # comes back with the new config (this used to say "no node")
    assert "the device plugin was restarted on: gpu-a;" in e.message
    assert "not restarted (they still run the previous config): gpu-b" in e.message
    assert "kubectl gpu share rollback" in e.hint and "run the same command again" in e.hint
    assert "replicas: 2" in _text(static_client)["data"]["any"]
    shown = show(api, Options())
    assert shown.configmap.record  # `share show` reads the state the interruption left

    change.rollback(api, Options(restart=False))

    assert _text(static_client)["data"]["any"] == "version: v1\n"


def test_a_denied_pod_delete_says_what_was_written_and_restarted(
    api: cluster.Api, static_plane: ControlPlane, tmp_path: Path
) -> None:
    # the real RBAC authorizer's 403, to a user granted everything but that
    config = static_plane.user_denied(
        "share-no-pod-delete", tmp_path / "k", [("delete", "pods", "")]
    )
    denied = cluster.connect(str(config))

    with pytest.raises(errors.GpuError) as stopped:
        change.share(denied, rollout.ShareRequest(replicas=2), Options())

    message = stopped.value.message
    assert f"failed after writing ConfigMap {NAMESPACE}/{CONFIGMAP}" in message
    assert "restarted on: no node" in message and "gpu-a, gpu-b" in message
    assert "grant 'delete' on 'pods'" in stopped.value.hint


def test_timeout_bounds_the_whole_rollout_not_each_batch(
    api: cluster.Api, static_client: KubeClient
) -> None:
    clock = Recreating(static_client, delay=4)
    options = Options(timeout=10, max_unavailable=1)

    result = change.share(
        api, rollout.ShareRequest(replicas=2), options, Timing(clock, clock.sleep)
    )

    rows = {r.node: r for r in result.nodes}
    assert rows["gpu-a"].result == "restarted"  # Ready after 4 s, and steady 3 s more
    assert 7 <= rows["gpu-a"].seconds < 8.5
    assert rows["gpu-b"].result == "failed"  # only what was left of the 10 s
    left = float(re.search(r"did not become Ready within ([0-9.]+)s", rows["gpu-b"].message)[1])
    assert abs(rows["gpu-a"].seconds + left - 10) < 0.6, (rows["gpu-a"].seconds, left)
    assert sum(clock.slept) <= 10.5


def test_no_plugin_is_deleted_once_the_timeout_has_passed(
    api: cluster.Api, static_client: KubeClient
) -> None:
    # gpu-a's new plugin is Ready after 1 s and still Ready when the 2.5 s run out (back, not
    # yet steady for 3 s): gpu-b must keep its plugin, not lose it with no time left to wait
    clock = Recreating(static_client, delay=1)
    before = {
        p["metadata"]["name"] for p in live_pods(static_client) if "gpu-b" in p["metadata"]["name"]
    }
    options = Options(timeout=2.5, max_unavailable=1)

    result = change.share(
        api, rollout.ShareRequest(replicas=2), options, Timing(clock, clock.sleep)
    )

    rows = {r.node: r for r in result.nodes}
    assert rows["gpu-a"].result == "restarted"
    assert rows["gpu-b"].result == "not-restarted"
    assert rows["gpu-b"].message == "not restarted: --timeout (2.5s) passed"
    after = {
        p["metadata"]["name"] for p in live_pods(static_client) if "gpu-b" in p["metadata"]["name"]
    }
    assert after == before  # untouched


def test_a_change_whose_record_cannot_be_kept_is_refused_up_front(
    static_client: KubeClient, static_plane: ControlPlane
) -> None:
    huge = "version: v1\n# " + "x" * 211_000 + "\n"
    install(static_client, layouts.helm({"any": huge}, "any"))
    static_client.create(gpu_node("gpu-a", 1))
    api = cluster.connect(str(static_plane.kubeconfig))

    with pytest.raises(rollout.RecordTooLarge, match="nothing was written"):
        change.share(api, rollout.ShareRequest(replicas=2), Options())

    written = _text(static_client)
    assert written["data"]["any"] == huge
    assert keys.PREVIOUS_CONFIG_ANNOTATION not in (written["metadata"].get("annotations") or {})


class OtherWriter(FakeClock):
    """Another `share` writes the ConfigMap while this one waits for capacity."""

    def __init__(self, client: KubeClient) -> None:
        super().__init__()
        self.client = client

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        if len(self.slept) == 1:
            data = {"data": {"any": "version: v1\n"}}
            self.client.patch("configmaps", CONFIGMAP, data, namespace=NAMESPACE)


def test_a_concurrent_change_ends_the_wait_and_names_the_winner(
    api: cluster.Api, static_client: KubeClient
) -> None:
    clock = OtherWriter(static_client)
    options = Options(restart=False, wait=True, timeout=300)

    result = change.share(
        api, rollout.ShareRequest(replicas=3), options, Timing(clock, clock.sleep)
    )

    assert {r.result for r in result.nodes} == {"failed"}
    message = result.nodes[0].message
    assert "was changed by another writer after this change" in message
    assert "To have this change take effect, run this command again" in message
    assert "would undo the other writer's change, not this one" in message
    assert sum(clock.slept) < 5  # not the whole 300 s timeout
