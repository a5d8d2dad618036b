"""The agent process's life as the kubelet sees it: SIGTERM, and the probes' health file.

Owns `Shutdown` (SIGTERM ends the agent where it safely can: at once between NVML calls and
API requests, which a new agent redoes or resumes from the phase recorded on the Node, but
only after a GPU reset, which must never be cut short), `Stopped`, and the heartbeat the
probes read: `beat` after every pass, `mark_unhealthy` when NVML has lost the driver (only a
new container helps), `check_health` for `--check-health`. Must not run a pass (the loop in
agent/passes.py does).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

log = logging.getLogger("kubectl_gpu.agent")


class Stopped(BaseException):
    """SIGTERM arrived. A BaseException, so that no `except Exception` on the way swallows it;
    `finally` blocks (NVML shutdown) still run."""


class Shutdown:
    """SIGTERM handling for one agent process."""

    def __init__(self) -> None:
        self.requested = False
        self._critical = 0
        self._previous: signal.Handlers | Callable[[int, FrameType | None], object] | int | None
        self._previous = None

    @contextlib.contextmanager
    def installed(self) -> Iterator[Shutdown]:
        """Handle SIGTERM for the block; the previous handler is put back afterwards."""
        self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        try:
            yield self
        finally:
            signal.signal(signal.SIGTERM, self._previous)

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            return  # already stopping: let it finish recording
        self.requested = True
        if self._critical:
            log.warning("SIGTERM: stopping once the GPU reset in progress has finished")
            return
        log.warning("SIGTERM: stopping")
        raise Stopped()

    @contextlib.contextmanager
    def critical(self) -> Iterator[None]:
        """A step that must not be cut short (a GPU reset): SIGTERM waits for its end."""
        self._critical += 1
        try:
            yield
        finally:
            self._critical -= 1
        if self.requested and not self._critical:
            raise Stopped()


def unhealthy_marker(heartbeat: Path) -> Path:
    return heartbeat.with_name(heartbeat.name + ".unhealthy")


def beat(heartbeat: Path) -> None:
    """Record that a pass finished: the probes read the file's age, not its content."""
    try:
        heartbeat.parent.mkdir(parents=True, exist_ok=True)
        heartbeat.touch()
        unhealthy_marker(heartbeat).unlink(missing_ok=True)
    except OSError as e:  # the probe will then report the agent unhealthy, which is true enough
        log.warning("cannot touch the heartbeat file %s: %s", heartbeat, e)


def mark_unhealthy(heartbeat: Path, reason: str) -> None:
    """The next probe fails with `reason`, so that the kubelet restarts the container."""
    try:
        heartbeat.parent.mkdir(parents=True, exist_ok=True)
        unhealthy_marker(heartbeat).write_text(reason[:1000])
    except OSError as e:
        log.warning("cannot write %s: %s", unhealthy_marker(heartbeat), e)


def check_health(heartbeat: Path, max_age: float) -> int:
    """0 when the last pass finished at most `max_age` seconds ago and NVML works, else 1."""
    marker = unhealthy_marker(heartbeat)
    if marker.exists():
        log.error("unhealthy: %s (a new container is needed)", marker.read_text()[:1000])
        return 1
    try:
        age = time.time() - heartbeat.stat().st_mtime
    except OSError:
        log.error("unhealthy: no pass has finished yet (%s does not exist)", heartbeat)
        return 1
    if age > max_age:
        log.error("unhealthy: the last pass finished %.0fs ago (limit %gs)", age, max_age)
        return 1
    return 0
