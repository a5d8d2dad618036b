"""Stopping node programs as the kubelet stops containers: SIGTERM to the program's process group
(each runs in a session of its own, tests/kit/node/sandbox.py), SIGKILL after `STOP_GRACE`, then
the thread reading its log let finish.

Owns `stop_program` (one) and `stop_programs` (a cluster's, together). Must not start anything.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterable

STOP_GRACE = 5.0  # seconds between SIGTERM and SIGKILL, as a short terminationGracePeriodSeconds


def stop_program(process: subprocess.Popen[str], reader: threading.Thread | None) -> None:
    """End a node program started in its own session: SIGTERM to its process group, SIGKILL
    after `STOP_GRACE`; then let the thread reading its log finish (unless that is us)."""
    stop_programs([(process, reader)])


def stop_programs(runs: Iterable[tuple[subprocess.Popen[str], threading.Thread | None]]) -> None:
    """End several node programs together, as `stop_program` ends one: every one is signalled
    before any is waited for, so a cluster's programs take one grace period to stop, not one
    each (stopped one after another, 300 programs of a 100-node benchmark took minutes)."""
    runs = list(runs)
    for process, _ in runs:
        _signal(process, signal.SIGTERM)
    until = time.monotonic() + STOP_GRACE
    for process, _ in runs:
        try:
            process.wait(max(0.0, until - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal(process, signal.SIGKILL)
            process.wait()
    until = time.monotonic() + STOP_GRACE
    for _, reader in runs:
        # a run stopped before anyone read it (spawned, then its pod went) has no reader yet
        if reader is not None and reader is not threading.current_thread() and reader.ident:
            reader.join(max(0.0, until - time.monotonic()))


def _signal(process: subprocess.Popen[str], number: int) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):  # it ended between the look and this
            os.killpg(process.pid, number)
