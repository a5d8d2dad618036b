"""A long wait (`mig apply --wait` may take minutes) says each node's state when it changes,
and on a terminal repeats it every few seconds, so the command never looks hung."""

from __future__ import annotations

import logging

import pytest

from kubectl_gpu.workflows.progress import Progress


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "kubectl_gpu.workflows.progress"]


def test_changes_are_said_once_each_without_a_terminal(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    progress = Progress(heartbeat=None)
    for elapsed, state in [(0, "waiting"), (3, "waiting"), (60, "waiting"), (61, "pending")]:
        progress.tell("gpu-b", state, elapsed)
    progress.tell("gpu-a", "waiting", 61)
    assert said(caplog) == [
        "node gpu-b: waiting (0s)",
        "node gpu-b: pending (61s)",
        "node gpu-a: waiting (61s)",
    ]
    assert progress.last("gpu-b") == "pending" and progress.last("gpu-c") == ""


def test_a_terminal_hears_an_unchanged_state_again_every_heartbeat(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    progress = Progress(heartbeat=5)
    for elapsed in (0, 2, 4, 5, 7, 10.5):
        progress.tell("gpu-b", "pending configuring", elapsed)
    assert said(caplog) == [
        "node gpu-b: pending configuring (0s)",
        "node gpu-b: pending configuring (5s)",
        "node gpu-b: pending configuring (10s)",
    ]
