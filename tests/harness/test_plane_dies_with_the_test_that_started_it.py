"""A test process killed outright (SIGKILL: no atexit, no finally) leaves no etcd, kube-apiserver,
controller-manager, scheduler or KWOK running, nor the plane's directory: its keeper notices the
pipe close and ends them. A plane stopped normally leaves its keeper no work."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.kit.plane.plane import wait_for

pytestmark = pytest.mark.timeout(120)

# A test process: starts a whole plane, says what it started, then waits to be killed.
_TEST_PROCESS = """
import json, time
from tests.kit.plane import ControlPlane
plane = ControlPlane().start()
print(json.dumps({"pids": [c.process.pid for c in plane.components], "dir": str(plane.dir),
                  "names": [c.name for c in plane.components]}), flush=True)
time.sleep(600)
"""


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting for a reaper (the container's init may never reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


def test_a_killed_test_process_takes_its_control_plane_with_it() -> None:
    test = subprocess.Popen(
        [sys.executable, "-c", _TEST_PROCESS],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    started: dict[str, list[int] | list[str] | str] = {}
    try:
        assert test.stdout is not None
        started = json.loads(test.stdout.readline())
        pids = [int(p) for p in started["pids"]]
        assert set(started["names"]) == {
            "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok",
        }  # fmt: skip
        assert all(map(_running, pids))

        test.send_signal(signal.SIGKILL)
        test.wait()

        directory = Path(str(started["dir"]))
        wait_for("the plane's processes to end", lambda: not any(map(_running, pids)), 30)
        wait_for("the plane's directory to be removed", lambda: not directory.exists(), 30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            test.kill()
        test.wait()
        if test.stdout is not None:
            test.stdout.close()
        for pid in started.get("pids", []):  # only what this test started, if still there
            with contextlib.suppress(ProcessLookupError):
                os.killpg(int(pid), signal.SIGKILL)
