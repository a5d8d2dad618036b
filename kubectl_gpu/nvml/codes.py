"""NVML's error codes as this port reports them: NVML's symbol for a code, and each
`NVMLError` turned into a `DeviceError` (or `NvmlUnavailableError` when the container has lost
the driver) that names where it happened. Must not call NVML itself."""

from __future__ import annotations

import pynvml

from kubectl_gpu.errors import DeviceError


class RebootRequiredError(DeviceError):
    """A MIG mode change waits for a GPU reset that this node cannot do; only a reboot helps."""


class NvmlUnavailableError(DeviceError):
    """NVML cannot reach the driver from this container ("Unknown Error" after a
    `systemctl daemon-reload`, the driver unloaded or upgraded, a GPU fallen off the bus):
    only a new container helps, so the agent reports itself unhealthy."""


# Codes that mean the container has lost the driver, not that one request was refused.
_UNAVAILABLE = tuple(
    getattr(pynvml, name)
    for name in (
        "NVML_ERROR_UNKNOWN",
        "NVML_ERROR_DRIVER_NOT_LOADED",
        "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
        "NVML_ERROR_GPU_IS_LOST",
        "NVML_ERROR_LIBRARY_NOT_FOUND",
    )
    if hasattr(pynvml, name)
)


def symbol(error: pynvml.NVMLError) -> str:
    """NVML's name for an error code, e.g. NVML_ERROR_IN_USE."""
    code = error.value
    for name in dir(pynvml):
        if name.startswith("NVML_ERROR_") and getattr(pynvml, name) == code:
            return name
    return f"NVML error {code}"


def error(where: str, e: pynvml.NVMLError) -> DeviceError:
    """The DeviceError to raise `from e`: where it happened, NVML's symbol and its text."""
    kind = NvmlUnavailableError if e.value in _UNAVAILABLE else DeviceError
    return kind(f"{where}: {symbol(e)} ({e})")
