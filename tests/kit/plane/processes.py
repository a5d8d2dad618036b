"""The control plane's component processes: each spawned in the plane's directory in a session
of its own, its output in `<name>.log` there, kept by keeper.py (which ends it if the test's
process dies in any way), waited for until it answers (or named with the end of its log when
it exits or never answers), and ended.

Owns `Component`, `Processes` and `ControlPlaneError`. Must not know what a component is for:
its arguments are components.py's and kwok.py's, its readiness the caller's check; must not
speak to the API server.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path


class ControlPlaneError(RuntimeError):
    """A component exited or did not answer in time while the plane started."""


@dataclasses.dataclass
class Component:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def exited(self) -> ControlPlaneError | None:
        """What to raise when the process is gone: its exit code and its log's end."""
        if self.process.poll() is None:
            return None
        return ControlPlaneError(
            f"{self.name} exited with {self.process.returncode}:\n{self.tail()}"
        )


class Processes:
    """The components running for one plane, in `directory`, in the order they started."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.components: list[Component] = []
        self._keeper: _Keeper | None = None

    def keep(self, *, remove: bool) -> None:
        """Start the keeper; with `remove` it also removes the directory if this process dies."""
        self._keeper = _Keeper()
        if remove:
            self._keeper.tell("remove", self.dir)

    def spawn(self, name: str, args: Sequence[str | Path]) -> Component:
        log = self.dir / f"{name}.log"
        handle = open(log, "wb")  # noqa: SIM115 - the child keeps it
        process = subprocess.Popen(
            [str(a) for a in args],
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.dir,
            start_new_session=True,  # a Ctrl-C in the test's terminal is the harness's to handle
        )
        handle.close()
        if self._keeper is not None:
            self._keeper.tell("keep", process.pid)  # its own group: pgid == pid
        component = Component(name, process, log)
        self.components.append(component)
        return component

    def wait(self, component: Component, deadline: float, ready: Callable[[], object]) -> None:
        """Until `ready()` is truthy (any exception it raises counts as not yet)."""
        _until([component], deadline, ready,
               lambda: f"{component.name} was not ready in time:\n{component.tail()}")  # fmt: skip

    def wait_all(self, deadline: float, ready: Callable[[], object], *, failure: str) -> None:
        """Until `ready()` is truthy, failing at once when any component has exited, and with
        `failure` at the deadline."""
        _until(self.components, deadline, ready, lambda: failure)

    def on_free_ports(self, start: Callable[[], None], tries: int = 3) -> None:
        """`start` (pick free ports, spawn, wait) again when a port it picked was taken before
        its component bound it: `free_port` must let the port go, and on a machine running
        several planes another process may bind it first."""
        for attempt in range(1, tries + 1):
            try:
                start()
                return
            except ControlPlaneError as e:
                if "address already in use" not in str(e) or attempt == tries:
                    raise
                self.components.pop()  # the component that lost the race has exited

    def stop(self) -> None:
        """End every component, the last started first, then the keeper."""
        for component in reversed(self.components):
            _terminate(component.process)
            if self._keeper is not None:
                self._keeper.tell("forget", component.process.pid)
        self.components.clear()
        if self._keeper is not None:
            self._keeper.close()
            self._keeper = None


class _Keeper:
    """keeper.py, fed through a pipe only this process holds: if this process dies in any way,
    the pipe closes and the keeper ends every component still kept."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-I", str(Path(__file__).with_name("keeper.py"))],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # not stopped by a signal sent to the test's group
        )

    def tell(self, verb: str, argument: object) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{verb} {argument}\n")
        self.process.stdin.flush()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(10)


def _terminate(process: subprocess.Popen[bytes], grace: float = 5.0) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _until(
    components: list[Component],
    deadline: float,
    ready: Callable[[], object],
    failure: Callable[[], str],
) -> None:
    """Look every 0.2 s until `ready()` is truthy (an exception it raises counts as not yet);
    a component that exited meanwhile raises its own error at once, the deadline `failure()`
    (read then: a component's tail at the end)."""
    while time.monotonic() < deadline:
        for component in components:
            exited = component.exited()
            if exited is not None:
                raise exited
        with contextlib.suppress(Exception):
            if ready():
                return
        time.sleep(0.2)
    raise ControlPlaneError(failure())
