"""NVML return codes and MIG mode values, typed, for the NVML stand-in (test code only).

Owns: re-exporting the pynvml constants the stand-in answers with as ``int`` (pynvml ships no
type information), so the symbol modules return typed values. Must not: define values of its own:
each one is pynvml's, so the stand-in and pynvml's exception mapping cannot drift apart.
"""

from __future__ import annotations

import pynvml

SUCCESS: int = pynvml.NVML_SUCCESS
UNINITIALIZED: int = pynvml.NVML_ERROR_UNINITIALIZED
INVALID_ARGUMENT: int = pynvml.NVML_ERROR_INVALID_ARGUMENT
NOT_SUPPORTED: int = pynvml.NVML_ERROR_NOT_SUPPORTED
NO_PERMISSION: int = pynvml.NVML_ERROR_NO_PERMISSION
NOT_FOUND: int = pynvml.NVML_ERROR_NOT_FOUND
INSUFFICIENT_SIZE: int = pynvml.NVML_ERROR_INSUFFICIENT_SIZE
RESET_REQUIRED: int = pynvml.NVML_ERROR_RESET_REQUIRED
IN_USE: int = pynvml.NVML_ERROR_IN_USE
NO_DATA: int = pynvml.NVML_ERROR_NO_DATA
INSUFFICIENT_RESOURCES: int = pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
ARGUMENT_VERSION_MISMATCH: int = pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
INVALID_STATE: int = pynvml.NVML_ERROR_INVALID_STATE
UNKNOWN: int = pynvml.NVML_ERROR_UNKNOWN
DRIVER_NOT_LOADED: int = pynvml.NVML_ERROR_DRIVER_NOT_LOADED

MIG_DISABLE: int = pynvml.NVML_DEVICE_MIG_DISABLE
MIG_ENABLE: int = pynvml.NVML_DEVICE_MIG_ENABLE
