"""Ctrl-C at any point of a command exits 130 (128 + SIGINT, as shells report it) with one
line saying what was done, never click's `Aborted!` and exit 1, never a traceback. A real
SIGINT is sent to `kubectl gpu` run through the real kubectl (which execs the plugin, so the
signal reaches our process), while the real API server's answer is held back by the fault
proxy: during a read-only command's first list, during `doctor`'s look at a pod, and during
a change's reads before its first write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tests.kit.plane.faults import Fault, FaultProxy

pytestmark = pytest.mark.usefixtures("real_control_plane")


def _start(tmp_path: Path, kubeconfig: Path, *args: str) -> subprocess.Popen[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubectl-gpu").symlink_to(Path(sys.executable).parent / "kubectl-gpu")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    env["HOME"] = str(tmp_path)
    return subprocess.Popen(
        ["kubectl", "gpu", *args, "--kubeconfig", str(kubeconfig)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _interrupt_when_held(proxy: FaultProxy, process: subprocess.Popen[str]) -> None:
    """SIGINT once the held request has reached the proxy (the command is waiting on it)."""
    deadline = time.monotonic() + 60
    while not any(s.faulted for s in proxy.seen):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the command never sent the held request"
        time.sleep(0.05)
    time.sleep(0.2)
    process.send_signal(signal.SIGINT)


@pytest.mark.parametrize(
    ("args", "held", "said"),
    [
        (["map"], "/api/v1/nodes", "`kubectl gpu map` only reads, so nothing was changed"),
        (["share", "show"], "/", "`kubectl gpu share show` only reads, so nothing"),
        (["doctor", "no-such-pod"], "/pods/no-such-pod", "`kubectl gpu doctor` only reads"),
        (["share", "--replicas", "2", "--node", "gpu-nowhere"], "/", "interrupted"),
    ],
    ids=["map", "share-show", "doctor", "share"],
)
def test_sigint_exits_130_with_one_line_and_no_traceback(
    proxied_kubeconfig: Path,
    fault_proxy: FaultProxy,
    tmp_path: Path,
    args: list[str],
    held: str,
    said: str,
) -> None:
    fault_proxy.add(Fault("GET", held, hang=30))  # the first such request only
    process = _start(tmp_path, proxied_kubeconfig, *args)
    try:
        _interrupt_when_held(fault_proxy, process)
        out, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()

    assert process.returncode == 130, err
    assert said in err
    assert "Aborted!" not in err and "Traceback" not in err
    assert out == ""


def test_ctrl_c_ends_a_watch_with_130_quietly(
    run_cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`top -w` stopped by Ctrl-C while it waits between two pictures: 130, as kubectl's own
    watches end (it exited 0), with nothing more said: stopping is how a watch ends."""
    from kubectl_gpu.cli import top

    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(top, "_once", lambda *args: {})
    monkeypatch.setattr(top.time, "sleep", interrupted)

    result = run_cli("top", "-A", "-w")

    assert result.exit_code == 130 and result.exception is None
    assert "Aborted!" not in result.stderr and "Traceback" not in result.stderr
