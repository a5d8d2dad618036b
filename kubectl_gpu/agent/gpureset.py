"""Resetting one GPU with the driver's `nvidia-smi`, as a pending MIG mode change needs.

Owns `smi_reset` (`nvidia-smi -r -i BUS`, with a time limit, its failure in our errors: "not
supported" means only a reboot helps). Must not decide when a GPU is reset (mig.apply does,
through reconcile.Options.reset) or shield the reset from SIGTERM (the pass loop does).
"""

from __future__ import annotations

import subprocess

from kubectl_gpu import errors, nvml

_SMI_TIMEOUT = 120.0


def smi_reset(index: int, bus_id: str) -> None:
    """`nvidia-smi -r -i BUS`: reset one GPU; 'not supported' means only a reboot helps."""
    try:
        done = subprocess.run(  # noqa: S603 (fixed argv, no shell)
            ["nvidia-smi", "-r", "-i", bus_id],
            capture_output=True,
            text=True,
            timeout=_SMI_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise nvml.RebootRequiredError(f"GPU {index}: cannot reset it: {e}") from e
    if done.returncode != 0:
        message = (done.stdout + done.stderr).strip().splitlines()
        text = message[-1] if message else f"exit {done.returncode}"
        if "not supported" in text.lower():
            raise nvml.RebootRequiredError(f"GPU {index}: {text}")
        raise errors.DeviceError(f"GPU {index}: reset failed: {text}")
