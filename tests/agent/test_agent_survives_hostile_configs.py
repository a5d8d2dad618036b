"""Hostile MIG ConfigMap values: the agent refuses what `validate` refuses, never crashes, and
never touches a GPU outside the selection; a withdrawn change does not stay pending."""

from __future__ import annotations

import pytest

from kubectl_gpu import errors, keys, nvml, validation
from kubectl_gpu.mig import plan
from kubectl_gpu.mig.apply import Start
from tests.agent.fixtures import Agent, ask, labels, notes, store_config, store_text
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import layouts

HEAD = "version: v1\nmig-configs:\n  bad:\n    - devices: all\n      mig-enabled: true\n"


def _spec(line: str) -> str:
    return HEAD + "      mig-devices:\n        " + line + "\n"


# (config text, a word the reason must name: the key or the value at fault)
HOSTILE = {
    "tagged-int": (_spec("1g.10gb: !!int x"), "1g.10gb"),
    "tagged-bool": (HEAD.replace("mig-enabled: true", "mig-enabled: !!bool maybe"), "maybe"),
    "tagged-float": (_spec("1g.10gb: !!float x"), "1g.10gb"),
    "5000-digit-count": (_spec("1g.10gb: " + "9" * 5000), "1g.10gb"),
    "huge-count": (_spec("1g.10gb: 99999999999999999999"), "1g.10gb"),
    "negative-count": (_spec("1g.10gb: -3"), "1g.10gb"),
    "device-filter-junk": (
        HEAD.replace("devices: all", "devices: all\n      device-filter: [5, {}]")
        + "      mig-devices: {}\n",
        "device-filter",
    ),
    "devices-true": (
        HEAD.replace("devices: all", "devices: [true]") + "      mig-devices: {'1g.10gb': 7}\n",
        "devices",
    ),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_a_config_validate_rejects_is_never_applied(
    sim_cluster: MakeSimCluster, agent: Agent, case: str
) -> None:
    text, named = HOSTILE[case]
    assert not validation.validate_text(text, "c.yaml", "mig-config").valid  # validate says no
    cluster = sim_cluster(["gpu-1=A100-SXM4-40GB:2"], layouts.helm(env={"MIG_STRATEGY": "mixed"}))
    before = [cluster.nvml("gpu-1").gpu(i).snapshot() for i in (0, 1)]
    store_text(cluster, "bad", text)
    ask(cluster, "gpu-1", "bad")

    assert agent(cluster, "gpu-1") is Start.NOTHING

    assert labels(cluster, "gpu-1")[keys.MIG_STATE_LABEL] == "failed"
    reason = notes(cluster, "gpu-1")[keys.MIG_REASON_ANNOTATION]
    assert "was not applied" in reason and named in reason and " line " in reason
    assert [cluster.nvml("gpu-1").gpu(i).snapshot() for i in (0, 1)] == before
    assert agent(cluster, "gpu-1") is Start.NOTHING  # no retry loop, still no crash


def test_a_fixed_config_is_applied_after_a_rejected_one(
    sim_cluster: MakeSimCluster, agent: Agent
) -> None:
    cluster = sim_cluster(["gpu-1=H100-SXM5-80GB:1"], layouts.helm(env={"MIG_STRATEGY": "mixed"}))
    store_text(cluster, "mine", HOSTILE["negative-count"][0].replace("bad:", "mine:"))
    ask(cluster, "gpu-1", "mine")
    agent(cluster, "gpu-1")
    assert labels(cluster, "gpu-1")[keys.MIG_STATE_LABEL] == "failed"

    store_config(cluster, "mine", {"3g.40gb": 2})
    assert agent(cluster, "gpu-1") is Start.CONFIGURE

    assert labels(cluster, "gpu-1")[keys.MIG_STATE_LABEL] == "success"


@pytest.mark.parametrize("phase", ["validating", "pausing-plugin", "configuring", "verifying"])
def test_removing_the_desired_label_mid_change_ends_pending(
    sim_cluster: MakeSimCluster, agent: Agent, phase: str
) -> None:
    cluster = sim_cluster(["gpu-1=A100-SXM4-40GB:1"], layouts.helm(env={"MIG_STRATEGY": "mixed"}))
    # an agent crashed mid-change, then someone removed the desired label
    body = {
        "metadata": {
            "labels": {keys.MIG_STATE_LABEL: "pending"},
            "annotations": {
                keys.MIG_PHASE_ANNOTATION: phase,
                keys.MIG_REQUEST_ANNOTATION: "balanced@0123456789ab",
            },
        }
    }
    cluster.client.patch("nodes", "gpu-1", body)

    assert agent(cluster, "gpu-1") is Start.ABANDON

    assert labels(cluster, "gpu-1")[keys.MIG_STATE_LABEL] == "failed"
    reason = notes(cluster, "gpu-1")[keys.MIG_REASON_ANNOTATION]
    assert "removed" in reason and "balanced@0123456789ab" in reason and "GPU 0" in reason
    assert keys.MIG_PHASE_ANNOTATION not in notes(cluster, "gpu-1")
    assert agent(cluster, "gpu-1") is Start.NOTHING


def test_a_changed_desired_label_mid_change_moves_on(
    sim_cluster: MakeSimCluster, agent: Agent
) -> None:
    cluster = sim_cluster(["gpu-1=H100-SXM5-80GB:1"], layouts.helm(env={"MIG_STRATEGY": "mixed"}))
    store_config(cluster, "other", {"7g.80gb": 1})
    body = {
        "metadata": {
            "labels": {keys.MIG_STATE_LABEL: "pending", keys.MIG_DESIRED_LABEL: "other"},
            "annotations": {
                keys.MIG_PHASE_ANNOTATION: "configuring",
                keys.MIG_REQUEST_ANNOTATION: "balanced@0123456789ab",
            },
        }
    }
    cluster.client.patch("nodes", "gpu-1", body)

    agent(cluster, "gpu-1")

    assert labels(cluster, "gpu-1")[keys.MIG_STATE_LABEL] == "success"


def test_a_bug_mid_change_ends_the_pass_failed_with_the_plugin_back(
    sim_cluster: MakeSimCluster, agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = sim_cluster(["gpu-1=H100-SXM5-80GB:1"], layouts.helm(env={"MIG_STRATEGY": "mixed"}))
    store_config(cluster, "mine", {"3g.40gb": 2})
    ask(cluster, "gpu-1", "mine")
    real = nvml.Session.execute

    def buggy(self: nvml.Session, step: plan.Step) -> None:
        if isinstance(step, plan.CreateGpuInstance):
            raise ZeroDivisionError("a bug while creating instances")
        real(self, step)

    monkeypatch.setattr(nvml.Session, "execute", buggy)

    with pytest.raises(errors.InternalError):
        agent(cluster, "gpu-1")

    assert labels(cluster, "gpu-1")[keys.MIG_STATE_LABEL] == "failed"
    reason = notes(cluster, "gpu-1")[keys.MIG_REASON_ANNOTATION]
    assert "internal error: ZeroDivisionError: a bug while creating instances" in reason
    assert keys.MIG_PHASE_ANNOTATION not in notes(cluster, "gpu-1")
    assert keys.MIG_PAUSED_PLUGIN_ANNOTATION not in notes(cluster, "gpu-1")  # plugin is back
    monkeypatch.setattr(nvml.Session, "execute", real)
    assert agent(cluster, "gpu-1") is Start.NOTHING  # failed stays failed: no retry loop
