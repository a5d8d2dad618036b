"""Errors a user can act on, and the exit codes they map to.

Owns the exception tree and `ExitCode`. Imports nothing from the package, so every
layer can raise these. Messages are written for the person at the terminal: what
failed, on which object, and (in `hint`) what to do about it.
"""

from __future__ import annotations

import enum
import re
import signal


class ExitCode(enum.IntEnum):
    """Process exit statuses, as kubectl uses them."""

    OK = 0
    ERROR = 1  # includes "validation found problems"
    USAGE = 2  # bad flags or arguments (click's UsageError uses 2 as well)
    # A bug in kubectl-gpu, not a problem with the input: CI can tell the two apart.
    # 70 is EX_SOFTWARE ("internal software error") from BSD's sysexits.h.
    INTERNAL = 70
    HANGUP = 129  # the terminal closed (128 + SIGHUP)
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as shells report it
    TERMINATED = 143  # SIGTERM (128 + 15), e.g. a CI job cancelled


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where Ctrl-C raises KeyboardInterrupt, so that every handler
    of an interruption (what was written, how to finish or undo) handles them too."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def interrupted_code(cause: BaseException) -> ExitCode:
    """The exit status a shell reports for the signal behind `cause` (128 + its number)."""
    signum = cause.signum if isinstance(cause, Interrupted) else int(signal.SIGINT)
    try:
        return ExitCode(128 + signum)
    except ValueError:
        return ExitCode.INTERRUPTED


REPORT_BUGS = "https://github.com/kubectl-gpu/kubectl-gpu/issues"  # plugin.yaml's homepage
# C0 and C1 controls, DEL, and the Unicode line/paragraph separators: anything that could
# move the cursor, clear the screen or start a new line in a user's terminal or a log.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text: object) -> str:
    """`text` safe to print on one terminal line: control characters escaped as `\\xNN`.

    Keys, file names and values come from users' files and the cluster; a raw ESC or
    newline in one could rewrite the terminal or forge a line of output.
    """
    text = str(text)
    if text.isprintable():  # nearly always: no control character, skip the regex (table cells)
        return text
    return _CONTROL.sub(_escape, text)


def shortened(text: object, limit: int = 60) -> str:
    """A value quoted in a message: printable, and cut to `limit` characters with `…`."""
    text = str(text)
    return printable(text if len(text) <= limit else f"{text[:limit]}…")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return {9: "\\t", 10: "\\n", 13: "\\r"}.get(code) or (
        f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    )


class GpuError(Exception):
    """Base of every error kubectl-gpu reports to a user without a traceback."""

    exit_code: ExitCode = ExitCode.ERROR

    def __init__(self, message: str, *, hint: str = "", details: tuple[str, ...] = ()) -> None:
        super().__init__("\n  ".join((message, *details)))
        self.message = message
        self.hint = hint
        self.details = details  # one line each under the message (pods a change hits, problems)


class UsageError(GpuError):
    """The command line asks for something impossible (exit 2)."""

    exit_code = ExitCode.USAGE


class InternalError(GpuError):
    """A bug in kubectl-gpu, caught at a boundary that must go on (exit 70)."""

    exit_code = ExitCode.INTERNAL


class InputError(GpuError):
    """An input file cannot be read at all (missing, too large, not text)."""


class ConfigError(GpuError):
    """A config is invalid; `findings` lists every problem found."""

    def __init__(self, message: str, *, hint: str = "", findings: tuple[object, ...] = ()) -> None:
        super().__init__(message, hint=hint)
        self.findings = findings


class ClusterError(GpuError):
    """The Kubernetes API refused or failed a request."""

    def __init__(self, message: str, *, hint: str = "", status: int | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status


class DeviceError(GpuError):
    """NVML reported an error for a GPU."""


class KubeletError(GpuError):
    """kubelet's node-local state (checkpoint, PodResources) could not be read."""
