"""SIGTERM and SIGHUP (the terminal closing) handled as Ctrl-C is, for commands that change a
cluster.

Owns `interruptible()`: while a change runs, those signals raise `errors.Interrupted` where
the code is, so the workflow's handler says what was written and how to finish or undo, and
the command exits 128 + the signal (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP). An
interruption no workflow explained still exits that way, never as click's "Aborted!" (1).
Must not decide what to say about the change (the workflows do).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from kubectl_gpu import errors

_HANDLED = (signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Run the body with SIGTERM/SIGHUP raising `errors.Interrupted`."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread (tests call from others)
        return
    before = {s: signal.getsignal(s) for s in _HANDLED}
    for signum in _HANDLED:
        signal.signal(signum, _raise)
    try:
        yield
    except KeyboardInterrupt as e:
        error = errors.GpuError(
            "interrupted",
            hint="`kubectl gpu share show` and "
            "`kubectl gpu mig status` show what the cluster holds now",
        )
        error.exit_code = errors.interrupted_code(e)
        raise error from e
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def _raise(signum: int, frame: FrameType | None) -> None:
    raise errors.Interrupted(signum)
