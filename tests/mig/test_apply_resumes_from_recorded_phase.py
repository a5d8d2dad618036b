"""`mig.apply.decide`: where each agent pass starts, so that a crash at any step resumes."""

from __future__ import annotations

import pytest

from kubectl_gpu.mig import apply
from kubectl_gpu.mig.apply import Observed, Phase, Record, Start, State

REQ = apply.request_key("balanced", "content")


def seen(matches: bool = False, *, waiting: bool = False, paused: bool = False) -> Observed:
    return Observed(REQ, matches, waiting, paused)


@pytest.mark.parametrize(
    ("record", "observed", "start"),
    [
        (Record(), seen(), Start.CONFIGURE),  # a new request
        (Record(), seen(matches=True), Start.VERIFY),  # already laid out: just verify
        (Record(REQ, State.PENDING, Phase.VALIDATING), seen(), Start.CONFIGURE),
        (Record(REQ, State.PENDING, Phase.PAUSING), seen(paused=True), Start.CONFIGURE),
        (Record(REQ, State.PENDING, Phase.CONFIGURING), seen(paused=True), Start.CONFIGURE),
        (Record(REQ, State.PENDING, Phase.RESTORING), seen(True, paused=True), Start.VERIFY),
        (Record(REQ, State.PENDING, Phase.VERIFYING), seen(True), Start.VERIFY),
        (Record(REQ, State.PENDING, Phase.VERIFYING), seen(False), Start.CONFIGURE),
        (Record(REQ, State.SUCCESS), seen(True), Start.NOTHING),
        (Record(REQ, State.SUCCESS), seen(True, paused=True), Start.RESTORE),
        (Record(REQ, State.SUCCESS), seen(False), Start.CONFIGURE),  # instances lost at reboot
        (Record(REQ, State.FAILED), seen(False), Start.NOTHING),  # no retry loop
        (Record(REQ, State.FAILED), seen(False, paused=True), Start.RESTORE),
        (Record(REQ, State.FAILED), Observed(REQ, False, False, False, True), Start.CONFIGURE),
        (Record(REQ, State.REBOOT_REQUIRED), seen(waiting=True), Start.NOTHING),
        (Record(REQ, State.REBOOT_REQUIRED), seen(waiting=False), Start.CONFIGURE),
        (Record("balanced@000000000000", State.FAILED), seen(), Start.CONFIGURE),  # edited
    ],
)
def test_each_recorded_phase_resumes_where_it_should(
    record: Record, observed: Observed, start: Start
) -> None:
    assert apply.decide(record, observed) is start


def test_no_desired_config_only_brings_a_paused_plugin_back() -> None:
    assert apply.decide(Record(REQ, State.SUCCESS), Observed("", False, False, True)) is (
        Start.RESTORE
    )
    assert apply.decide(Record(), Observed("", False, False, False)) is Start.NOTHING


@pytest.mark.parametrize("phase", [None, *Phase])
@pytest.mark.parametrize("paused", [False, True])
def test_a_change_withdrawn_mid_way_is_abandoned_not_left_pending(
    phase: Phase | None, paused: bool
) -> None:
    record = Record(REQ, State.PENDING, phase)
    assert apply.decide(record, Observed("", False, False, paused)) is Start.ABANDON


def test_an_edit_of_the_same_config_name_is_a_new_request() -> None:
    assert apply.request_key("a", "x") != apply.request_key("a", "y")
    assert apply.request_key("a", "x").startswith("a@")


def test_unknown_recorded_values_read_as_absent() -> None:
    assert apply.Record.from_values(REQ, "rebooting", "?") == Record(REQ, None, None)


def test_a_profile_the_layout_dropped_must_show_zero() -> None:
    have = {"nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-3g.40gb": "2", "cpu": "8"}
    missing = apply.expected_resources({"nvidia.com/mig-3g.40gb": 2}, have)
    assert missing == {"nvidia.com/mig-1g.10gb": (0, 7)}
