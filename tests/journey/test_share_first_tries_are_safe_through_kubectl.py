"""First tries of `kubectl gpu share` through the real kubectl, on the simulated cluster: a
rollback refuses to throw away a hand edit made after the change it undoes (shows the diff;
`--force` discards it); a dry run exits as the real run would, naming the pods."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from kubectl_gpu import keys
from tests.cli.doctorpods import gpu_pod, run_pods
from tests.journey.fixtures import Kubectl
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(120)]
PLAIN = "version: v1\nflags:\n  migStrategy: none\n"
CONFIGMAP = ("configmap", "-n", "nvidia-device-plugin", "nvdp-nvidia-device-plugin-configs")


def text_of(k: Kubectl, key: str) -> str:
    found = k("get", *CONFIGMAP, "-o", "json")
    assert found.returncode == 0, found.stderr
    return str(json.loads(found.stdout)["data"][key])


def test_rollback_refuses_to_overwrite_a_hand_edit_unless_forced(
    sim_cluster: MakeSimCluster, kubectl: Callable[[SimCluster], Kubectl]
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 2)], "helm", {"any": PLAIN}, "any")
    k = kubectl(cluster)
    shared = k("gpu", "share", "--replicas", "4", "--wait", "--timeout", "30s")
    assert shared.returncode == 0, shared.stderr
    edited = text_of(k, "any").replace("replicas: 4", "replicas: 3")
    patch = json.dumps({"data": {"any": edited}})
    assert k("patch", *CONFIGMAP, "--type", "merge", "-p", patch).returncode == 0

    refused = k("gpu", "share", "rollback")

    assert refused.returncode == 1
    assert (
        "key(s) any of ConfigMap nvidia-device-plugin/nvdp-nvidia-device-plugin-configs "
        "were edited after the change to roll back was written" in refused.stderr
    )
    assert "\n  -      replicas: 4\n  +      replicas: 3\n" in refused.stderr  # the diff
    assert "--force" in refused.stderr
    assert text_of(k, "any") == edited  # the edit is kept, and so is the record
    notes = json.loads(k("get", *CONFIGMAP, "-o", "json").stdout)["metadata"]["annotations"]
    assert keys.PREVIOUS_CONFIG_ANNOTATION in notes

    forced = k("gpu", "share", "rollback", "--force", "--wait", "--timeout", "30s")

    assert forced.returncode == 0, forced.stderr
    assert text_of(k, "any") == PLAIN
    assert cluster.allocatable("gpu-a") == 2


def test_a_dry_run_exits_as_the_real_run_would(
    sim_cluster: MakeSimCluster, kubectl: Callable[[SimCluster], Kubectl]
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1)], "helm", {"any": PLAIN}, "any")
    run_pods(cluster, gpu_pod("train"))
    k = kubectl(cluster)
    change = ("gpu", "share", "--replicas", "2", "--rename-by-default")

    runs = [k(*change, dry) for dry in ("--dry-run", "--dry-run=server", "--diff")]
    real = k(*change)

    assert [r.returncode for r in runs] == [real.returncode] * 3 == [1, 1, 1]
    for run in (*runs, real):
        assert "  default/train: uses nvidia.com/gpu, which disappears (1 → 0)" in run.stderr
    assert text_of(k, "any") == PLAIN
