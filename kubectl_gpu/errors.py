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


def printable(text: object) -> str:
    """`text` safe to print on one terminal line: every character Python does not call
    printable escaped as `\\xNN`/`\\uNNNN`.

    Keys, file names and values come from users' files and the cluster; a raw ESC or
    newline in one could rewrite the terminal or forge a line of output, a bidi override
    (U+202E) or an invisible format character could make a name read as another, and a lone
    surrogate (JSON's `"\\ud800"`) cannot be written to a UTF-8 terminal at all. Escaped:
    C0/C1 controls, DEL, format characters (Cf: bidi controls, zero-width characters),
    surrogates, private-use and unassigned code points, line/paragraph separators and every
    space but U+0020. Every table, tree and message goes through here (cli/render.py's cells).
    """
    text = str(text)
    if text.isprintable():  # nearly always: nothing to escape, skip the scan (table cells)
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def shortened(text: object, limit: int = 60) -> str:
    """A value quoted in a message: printable, and cut to `limit` characters with `…`."""
    text = str(text)
    return printable(text if len(text) <= limit else f"{text[:limit]}…")


_SHORT = {9: "\\t", 10: "\\n", 13: "\\r"}


def _escape(char: str) -> str:
    code = ord(char)
    if code in _SHORT:
        return _SHORT[code]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


# Credentials this process holds (a kubeconfig's token or password, what an exec plugin
# returned), registered by the code that loads them. Whatever fails, no message, hint, log
# line or traceback prints them: `without_secrets` is applied where each of those is written
# (cli's error boundary and its log handler). Patterns catch what was never registered: an
# `Authorization` value quoted by a library or a server, a PEM private key.
_SECRETS: set[str] = set()
_MIN_SECRET = 4  # shorter values would blank ordinary words; no real credential is that short
_AUTHORIZATION = re.compile(r"\b(Bearer|Basic)( +)[A-Za-z0-9._~+/=-]{8,}")  # header form
_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S
)
HIDDEN = "[redacted]"


def keep_secret(*values: object) -> None:
    """Never print any of `values` (and their stripped forms) from now on, in this process."""
    for value in values:
        if isinstance(value, str):
            for form in (value, value.strip()):
                if len(form) >= _MIN_SECRET:
                    _SECRETS.add(form)


def without_secrets(text: str) -> str:
    """`text` with every registered credential, `Bearer`/`Basic` value and private key
    replaced by `[redacted]`."""
    for secret in sorted(_SECRETS, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, HIDDEN)
        # a library may quote the value escaped (the repr of a header's bytes: `tok\\n`)
        escaped = secret.encode("unicode_escape").decode("ascii")
        if escaped != secret and escaped in text:
            text = text.replace(escaped, HIDDEN)
    text = _AUTHORIZATION.sub(lambda m: f"{m[1]}{m[2]}{HIDDEN}", text)
    return _PRIVATE_KEY.sub(HIDDEN, text)


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
