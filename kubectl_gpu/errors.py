"""Errors a user can act on, and the exit codes they map to.

Owns the exception tree and `ExitCode`. Imports nothing from the package, so every
layer can raise these. Messages are written for the person at the terminal: what
failed, on which object, and (in `hint`) what to do about it.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """Process exit statuses, as kubectl uses them."""

    OK = 0
    ERROR = 1  # includes "validation found problems"
    USAGE = 2  # bad flags or arguments (click's UsageError uses 2 as well)


class GpuError(Exception):
    """Base of every error kubectl-gpu reports to a user without a traceback."""

    exit_code: ExitCode = ExitCode.ERROR

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(GpuError):
    """The command line asks for something impossible (exit 2)."""

    exit_code = ExitCode.USAGE


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
