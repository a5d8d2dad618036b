"""ctypes marshalling and opaque handles for the NVML stand-in (test code only).

Owns: reading the arguments pynvml passes to a C symbol (``c_uint`` or int values, ``byref(...)``
objects, pointers, arrays, ``c_char_p`` strings), writing out-parameters through ctypes the way
the C library writes them, and the table behind opaque handles. A handle is the address of a small
ctypes buffer the stand-in owns, so pynvml's ``c_nvmlDevice_t`` values are real, dereferenceable
pointers, compare like the library's, and map back to the GPU, GPU instance, compute instance or
MIG device they name. Must not: decide anything about GPUs (device.py, instances.py).
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tests.kit.node.libnvml import codes
from tests.kit.node.libnvml.device import Gpu
from tests.kit.node.libnvml.instances import ComputeInstance, GpuInstance


def uint(value: Any) -> int:
    """An unsigned value passed as ``c_uint(...)`` or a plain int."""
    if isinstance(value, ctypes._SimpleCData):
        return int(value.value)
    return int(value)


def target(ref: Any) -> Any:
    """What a ``byref(x)``, ``pointer(x)`` or a bare ctypes object refers to (None for NULL)."""
    if ref is None:
        return None
    if hasattr(ref, "_obj"):  # byref(...) objects (CArgObject)
        return ref._obj
    if isinstance(ref, ctypes._Pointer):
        return ref.contents if ref else None
    return ref


def write_value(ref: Any, value: int) -> bool:
    """Store ``value`` through an out-parameter; False when it is NULL."""
    obj = target(ref)
    if obj is None:
        return False
    obj.value = value
    return True


def read_text(value: Any) -> str:
    """A C string argument (``c_char_p``, bytes or str) as text."""
    if isinstance(value, ctypes.c_char_p):
        value = value.value
    if isinstance(value, bytes):
        return value.decode()
    return str(value)


def write_text(buffer: Any, size: Any, text: str) -> int:
    """Copy ``text`` NUL-terminated into a caller's char buffer of ``size`` bytes."""
    data = text.encode() + b"\0"
    if buffer is None:
        return codes.INVALID_ARGUMENT
    if len(data) > uint(size) or len(data) > ctypes.sizeof(target(buffer)):
        return codes.INSUFFICIENT_SIZE
    ctypes.memmove(target(buffer), data, len(data))
    return codes.SUCCESS


def capacity(array: Any) -> int | None:
    """How many elements a caller's array holds; None for a bare pointer (trusted, as in C)."""
    obj = target(array) if not isinstance(array, ctypes._Pointer) else array
    if isinstance(obj, ctypes.Array):
        return len(obj)
    return None


def elements(array: Any) -> Any:
    """A caller's array (given directly, by byref or as a pointer), indexable as in C."""
    return array if isinstance(array, ctypes._Pointer) else target(array)


def write_placements(array: Any, counter: Any, pairs: Sequence[tuple[int, int]]) -> int:
    """NVML's two-call pattern: a NULL array gets the count only; else fill the caller's array."""
    counter.value = len(pairs)
    if array is None:
        return codes.SUCCESS
    room = capacity(array)
    if room is not None and room < len(pairs):
        return codes.INSUFFICIENT_SIZE
    items = elements(array)
    for i, (start, size) in enumerate(pairs):
        items[i].start, items[i].size = start, size
    return codes.SUCCESS


@dataclass(frozen=True)
class HandleTarget:
    """What an opaque handle names. ``kind`` is "gpu", "gi", "ci" or "mig"."""

    kind: str
    gpu: Gpu
    gi: GpuInstance | None = None
    ci: ComputeInstance | None = None

    @property
    def alive(self) -> bool:
        """False once its instance was destroyed or its GPU reset."""
        return (self.gi is None or self.gi.alive) and (self.ci is None or self.ci.alive)


class HandleTable:
    """Opaque handle values for stand-in objects, stable per object, resolvable back."""

    def __init__(self) -> None:
        self._addresses: dict[HandleTarget, int] = {}
        self._targets: dict[int, tuple[HandleTarget, ctypes.Array[ctypes.c_char]]] = {}

    def address(self, handle_target: HandleTarget) -> int:
        """The handle value for ``handle_target``; the same one every time."""
        if handle_target not in self._addresses:
            anchor = ctypes.create_string_buffer(16)  # kept alive: the handle points into it
            address = ctypes.addressof(anchor)
            self._addresses[handle_target] = address
            self._targets[address] = (handle_target, anchor)
        return self._addresses[handle_target]

    def resolve(self, handle: Any) -> HandleTarget | None:
        """What a handle argument names, or None for NULL, foreign or stale handles."""
        try:
            address = ctypes.cast(handle, ctypes.c_void_p).value
        except (ctypes.ArgumentError, TypeError):
            return None
        entry = self._targets.get(address) if address else None
        if entry is None or not entry[0].alive:
            return None
        return entry[0]

    def write(self, ref: Any, handle_target: HandleTarget) -> bool:
        """Store the handle for ``handle_target`` into a ``byref(c_nvml…_t())`` out-parameter."""
        obj = target(ref)
        if obj is None:
            return False
        ctypes.c_void_p.from_buffer(obj).value = self.address(handle_target)
        return True

    def pointer(self, handle_target: HandleTarget, pointer_type: Any) -> Any:
        """The handle as a pointer of ``pointer_type``, for arrays and struct fields."""
        return ctypes.cast(ctypes.c_void_p(self.address(handle_target)), pointer_type)
