"""A stuck MIG change is told from one still running: pending too long (by the agent's
since-when record), operands left paused with no change running, and our `success` against
the devices the agent reports. `mig recover` puts paused labels back to their previous values."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from kubectl_gpu import keys
from kubectl_gpu.mig import stuck
from kubectl_gpu.mig.stuck import NodeMig, ReportedGpu

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.timezone.utc)
PAUSED = keys.PAUSED_FOR_MIG_CHANGE
PLUGIN = keys.DEPLOY_DEVICE_PLUGIN_LABEL
GFD = "nvidia.com/gpu.deploy.gpu-feature-discovery"


def ago(minutes: int) -> str:
    return stuck.timestamp(NOW - dt.timedelta(minutes=minutes))


def node(labels: dict[str, str], notes: dict[str, str] | None = None, **kw: object) -> NodeMig:
    return NodeMig("gpu-a", labels, notes or {}, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("labels", "notes", "stuck_because"),
    [
        # the operator's MIG manager, pending for 2 hours: stuck
        ({keys.MIG_CONFIG_STATE_LABEL: "pending"}, {keys.MIG_PENDING_SINCE_ANNOTATION: ago(120)},
         ["nvidia.com/mig.config.state=pending for 2h (longer than 30m)"]),
        # ours, pending for 5 minutes with the plugin paused: a change is running
        ({keys.MIG_STATE_LABEL: "pending", PLUGIN: PAUSED},
         {keys.MIG_PENDING_SINCE_ANNOTATION: ago(5)}, []),
        # pending without a since-when record: nothing says it is stuck
        ({keys.MIG_CONFIG_STATE_LABEL: "pending", PLUGIN: PAUSED}, {}, []),
        # labels left paused after the change ended (upstream gpu-operator#2833)
        ({keys.MIG_CONFIG_STATE_LABEL: "failed", PLUGIN: PAUSED, GFD: PAUSED}, {},
         [f"{PLUGIN}, {GFD} left paused-for-mig-change with no MIG change running"]),
        ({PLUGIN: PAUSED}, {},
         [f"{PLUGIN} left paused-for-mig-change with no MIG change running"]),
        # pending too long and paused: both reasons
        ({keys.MIG_STATE_LABEL: "pending", PLUGIN: PAUSED},
         {keys.MIG_PENDING_SINCE_ANNOTATION: ago(31)},
         ["kubectl-gpu.io/mig.state=pending for 31m", f"{PLUGIN} left paused-for-mig-change"]),
        # at rest
        ({keys.MIG_STATE_LABEL: "success", PLUGIN: "true"}, {}, []),
    ],
)  # fmt: skip
def test_stuck_is_told_by_time_and_by_labels(
    labels: dict[str, str], notes: dict[str, str], stuck_because: list[str]
) -> None:
    reasons = stuck.reasons(node(labels, notes), NOW)
    assert len(reasons) == len(stuck_because), reasons
    for reason, start in zip(reasons, stuck_because, strict=True):
        assert reason.startswith(start)


def test_the_threshold_is_the_callers() -> None:
    pending = node({keys.MIG_STATE_LABEL: "pending"}, {keys.MIG_PENDING_SINCE_ANNOTATION: ago(10)})
    assert stuck.reasons(pending, NOW) == ()
    [reason] = stuck.reasons(pending, NOW, dt.timedelta(minutes=5))
    assert reason == (f"kubectl-gpu.io/mig.state=pending for 10m (longer than 5m) since {ago(10)}")


LAYOUT = json.dumps({"0": "1g.10gb@0 1g.10gb@1", "1": "MIG off", "2": "not MIG-capable"})


@pytest.mark.parametrize(
    ("reported", "wrong"),
    [
        ((ReportedGpu(0, True, 2), ReportedGpu(1, False, 0), ReportedGpu(2, False, 0)), []),
        ((ReportedGpu(0, True, 0), ReportedGpu(1, False, 0)), ["GPU 0 shows 0 MIG device(s)"]),
        ((ReportedGpu(0, False, 0), ReportedGpu(1, True, 0)),
         ["GPU 0 shows MIG off", "GPU 1 shows 0 MIG device(s)"]),
    ],
)  # fmt: skip
def test_success_that_the_reported_devices_deny_is_stuck(
    reported: tuple[ReportedGpu, ...], wrong: list[str]
) -> None:
    labels = {keys.MIG_STATE_LABEL: "success"}
    subject = node(labels, {keys.MIG_LAYOUT_ANNOTATION: LAYOUT}, reported=reported)
    reasons = stuck.reasons(subject, NOW)
    assert [r.split(" shows ")[1].split(",")[0] for r in reasons] == [
        w.split(" shows ")[1] for w in wrong
    ]
    assert all(r.startswith("kubectl-gpu.io/mig.state=success but GPU") for r in reasons)


def test_no_report_means_no_comparison() -> None:
    labels = {keys.MIG_STATE_LABEL: "success"}
    assert stuck.reasons(node(labels, {keys.MIG_LAYOUT_ANNOTATION: LAYOUT}), NOW) == ()


def test_recovery_restores_what_the_agent_kept_and_true_elsewhere() -> None:
    labels = {PLUGIN: PAUSED, GFD: PAUSED, "nvidia.com/gpu.deploy.dcgm": "true"}
    kept = {keys.MIG_PAUSED_PLUGIN_ANNOTATION: "false"}  # the plugin was off before the change
    assert stuck.restored_labels(node(labels, kept)) == {PLUGIN: "false", GFD: "true"}
    assert stuck.restored_labels(node(labels)) == {PLUGIN: "true", GFD: "true"}


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(42, "42s"), (60 * 42, "42m"), (3600 * 3 + 300, "3h5m"), (86400 * 3, "3d")],
)
def test_ages_read_like_kubectl(seconds: float, text: str) -> None:
    assert stuck.age(seconds) == text


def test_an_unreadable_since_when_is_unknown() -> None:
    assert stuck.pending_since({keys.MIG_PENDING_SINCE_ANNOTATION: "yesterday"}) is None
    naive = stuck.pending_since({keys.MIG_PENDING_SINCE_ANNOTATION: "2026-03-01T10:00:00"})
    assert naive == dt.datetime(2026, 3, 1, 10, 0, tzinfo=dt.timezone.utc)


def test_a_pending_change_whose_actuator_does_not_run_is_stuck_at_once() -> None:
    labels = {keys.MIG_STATE_LABEL: "pending", PLUGIN: PAUSED}
    fresh = {keys.MIG_PENDING_SINCE_ANNOTATION: ago(1)}
    gone = NodeMig("gpu-a", labels, fresh, actuator="the kubectl-gpu agent", actuator_runs=False)
    first, second = stuck.reasons(gone, NOW)
    assert first == (
        "kubectl-gpu.io/mig.state=pending, but no pod of the kubectl-gpu agent runs on the node "
        "to make the change"
    )
    assert second.startswith(f"{PLUGIN} left paused-for-mig-change with no MIG change running")
    unknown = NodeMig("gpu-a", labels, fresh, actuator="the kubectl-gpu agent")
    assert stuck.reasons(unknown, NOW) == ()  # pods not read: nothing is claimed
