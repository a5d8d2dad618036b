"""``FakeLibNvml``: the NVML stand-in's whole library, and what pynvml sees of it (test code only).

Owns: composing the symbol groups into one library object with its test hooks (GPUs, privilege,
resets, processes, snapshot), and ``LibraryView``, the object installed as ``pynvml.nvmlLib``:
``getattr(view, name)`` yields a ``CSymbol`` for every implemented C symbol and raises
AttributeError for any other name, which pynvml turns into ``NVMLError_FunctionNotFound``.
A ``CSymbol`` behaves like a ctypes function pointer where pynvml relies on it: it is callable
and accepts ``restype``/``argtypes`` assignments (pynvml sets ``restype`` on nvmlErrorString).
Must not: touch pynvml's module globals (__init__.py installs and restores them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tests.kit.node.libnvml import codes
from tests.kit.node.libnvml.base import SYMBOL_MARK
from tests.kit.node.libnvml.compute_instances import ComputeInstanceSymbols
from tests.kit.node.libnvml.device import Gpu
from tests.kit.node.libnvml.gpu_instances import GpuInstanceSymbols
from tests.kit.node.libnvml.symbols import InventorySymbols


class FakeLibNvml(InventorySymbols, GpuInstanceSymbols, ComputeInstanceSymbols):
    """A node's NVML: its GPUs behind methods named after NVML's C symbols.

    Build with GPU model keys (``models.MODELS``), ``Gpu`` objects or reading dicts::

        FakeLibNvml(["H100-SXM5-80GB", "H100-SXM5-80GB", "L4"])

    Test hooks (never called by the code under test): ``gpu(i)``, ``privileged``,
    ``add_process``/``stop_process``, ``raise_xid``, ``reset(i)``, ``reboot()``, ``snapshot()``,
    ``calls``.
    The hooks on ``FakeLibNvml`` take the library's lock; those on ``Gpu`` do not (setup only).
    """

    def __init__(self, gpus: Sequence[str | Gpu | dict[str, Any]] = ()) -> None:
        super().__init__([_gpu(spec, index) for index, spec in enumerate(gpus)])
        self.view = LibraryView(self)

    @classmethod
    def from_readings(cls, readings: Sequence[dict[str, Any]]) -> FakeLibNvml:
        """A node built from per-GPU reading dicts (see ``Gpu.from_readings``)."""
        return cls(list(readings))

    @property
    def initialized(self) -> bool:
        """Whether nvmlInit has been called more often than nvmlShutdown."""
        return self.init_count > 0

    def gpu(self, index: int) -> Gpu:
        """The GPU at NVML index ``index``."""
        return self.gpus[index]

    def add_process(
        self,
        index: int,
        pid: int,
        used_mib: int = 256,
        mig_device: tuple[int, int] | None = None,
        sm_percent: int | None = None,
    ) -> None:
        """Start a compute process on GPU ``index``, in MIG device (GI ID, CI ID) when given."""
        with self.lock:
            self.gpus[index].add_process(pid, used_mib, mig_device, sm_percent)

    def raise_xid(self, index: int, xid: int, mig_device: tuple[int, int] | None = None) -> None:
        """An Xid error on GPU ``index`` (in MIG device (GI ID, CI ID) when given)."""
        with self.lock:
            self.gpus[index].raise_xid(xid, mig_device)

    def stop_process(self, index: int, pid: int) -> None:
        """End a compute process on GPU ``index``."""
        with self.lock:
            self.gpus[index].stop_process(pid)

    def reset(self, index: int) -> int:
        """``nvidia-smi -r -i INDEX``: NVML_SUCCESS, or NVML_ERROR_IN_USE with processes."""
        with self.lock:
            return self.gpus[index].reset()

    def on_return(self, symbol: str, action: Callable[[], None]) -> None:
        """Run `action` (outside the library's lock) each time `symbol` returns."""
        self.after_return[symbol] = action

    def lose_driver(self, code: int = codes.UNKNOWN) -> None:
        """What a container sees after `systemctl daemon-reload` (NVML_ERROR_UNKNOWN,
        "Unknown Error") or a driver unload (NVML_ERROR_DRIVER_NOT_LOADED): every call fails."""
        with self.lock:
            self.lost = code

    def reboot(self) -> None:
        """The node reboots: processes end, every GPU comes back as after a reset."""
        with self.lock:
            for gpu in self.gpus:
                gpu.reboot()

    def snapshot(self) -> dict[str, Any]:
        """The whole node's state as JSON-serialisable data."""
        with self.lock:
            return {
                "driver_version": self.driver_version,
                "gpus": [gpu.snapshot() for gpu in self.gpus],
            }


def _gpu(spec: str | Gpu | dict[str, Any], index: int) -> Gpu:
    if isinstance(spec, Gpu):
        return spec
    if isinstance(spec, str):
        return Gpu.of(spec, index)
    return Gpu.from_readings({"index": index, **spec})


_STILL_ANSWER = ("nvmlErrorString", "nvmlShutdown")


class CSymbol:
    """One exported C function: call it like pynvml calls a ctypes function pointer."""

    def __init__(self, lib: FakeLibNvml, name: str, needs_init: bool) -> None:
        self.__name__ = name
        self.restype: Any = None
        self.argtypes: Any = None
        self._lib = lib
        self._function: Callable[..., Any] = getattr(lib, name)
        self._needs_init = needs_init

    def __call__(self, *args: Any) -> Any:
        with self._lib.lock:
            result = self._call(*args)
        action = self._lib.after_return.get(self.__name__)
        if action is not None:
            action()
        return result

    def _call(self, *args: Any) -> Any:
        self._lib.calls.append(self.__name__)
        if self._lib.lost is not None and self.__name__ not in _STILL_ANSWER:
            return self._lib.lost
        if self._needs_init and not self._lib.initialized:
            return codes.UNINITIALIZED
        return self._function(*args)

    def __repr__(self) -> str:
        return f"<fake NVML symbol {self.__name__}>"


class LibraryView:
    """The object installed as ``pynvml.nvmlLib``: only C symbols are visible through it."""

    def __init__(self, lib: FakeLibNvml) -> None:
        self._lib = lib

    def __getattr__(self, name: str) -> CSymbol:
        method = getattr(type(self._lib), name, None)
        mark = getattr(method, SYMBOL_MARK, None)
        if mark is None:
            raise AttributeError(f"libnvidia-ml stand-in has no symbol {name}")
        symbol = CSymbol(self._lib, name, needs_init=mark == "after-init")
        setattr(self, name, symbol)  # like dlsym once: later lookups find the attribute
        return symbol

    def __repr__(self) -> str:
        return f"<CDLL 'libnvidia-ml.so.1' stand-in, {len(self._lib.gpus)} GPUs>"
