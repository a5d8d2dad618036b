"""`nvidia-smi` on a simulated node: the GPU reset the node agent runs (test code only).

Owns the command lines `nvidia-smi -r -i <index|bus ID>`, `-L`, and the two NVIDIA's DRA
kubelet plugin runs when it prepares a shared GPU (`compute-policy -i <UUID> --set-timeslice
<0-3>` for a TimeSlicing claim, `-i <UUID> -c <mode>` for MPS: accepted for a GPU that exists,
not kept, as the library has no compute policy), over the node's GPU state file
(`<driver root>/gpus.json`, the file the node's libnvidia-ml.so.1 serves, read and written under
the same lock), with nvidia-smi's exit codes and wording: 0 after a reset, 3 when the GPU is in
use ("…being used by some other process"), 2 for an unknown GPU. Each node's copy lives at
`<driver root>/usr/bin/nvidia-smi` (tests/kit/node/libnvml/driver.py) and finds its root from its
own path; $SIM_GPU_STATE names the file where no driver root exists (an agent run in-process
over the pynvml-level stand-in). Must not: be used by product code, which only ever finds it as
`nvidia-smi` on PATH.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from tests.kit.node.libnvml import codes
from tests.kit.node.libnvml.device import Gpu
from tests.kit.node.libnvml.library import FakeLibNvml
from tests.kit.node.libnvml.statefile import GpuStateFile, load_library

STATE_ENV = "SIM_GPU_STATE"


def _find(lib: FakeLibNvml, wanted: str) -> Gpu | None:
    for gpu in lib.gpus:
        if wanted == str(gpu.index) or wanted.upper() in (gpu.pci_bus_id.upper(), gpu.uuid.upper()):
            return gpu
        if wanted.upper() == gpu.pci_bus_id.upper()[4:]:  # "0000:18:00.0" short domain form
            return gpu
    return None


def _reset(state: GpuStateFile, wanted: str) -> int:
    lib = load_library(state)
    with state.locked(), lib.lock:
        state.refresh(lib)
        gpu = _find(lib, wanted)
        if gpu is None:
            print(f"No devices were found matching {wanted!r}.", file=sys.stderr)
            return 2
        if gpu.reset() != codes.SUCCESS:
            print(
                f"Unable to reset GPU {gpu.pci_bus_id} because it's being used by some other "
                "process (e.g. CUDA application, graphics application like X server, monitoring "
                "application like other instance of nvidia-smi).",
                file=sys.stderr,
            )
            return 3
        state.save(lib)
    print(f"GPU {gpu.pci_bus_id} was successfully reset.")
    print("All done.")
    return 0


def _policy(state: GpuStateFile, wanted: str, what: str, value: str, known: Sequence[str]) -> int:
    gpu = _find(load_library(state), wanted)
    if gpu is None:
        print(f"No devices were found matching {wanted!r}.", file=sys.stderr)
        return 2
    if value not in known:
        print(f"Invalid {what} {value!r}.", file=sys.stderr)
        return 2
    print(f"Set {what} to {value} for GPU {gpu.pci_bus_id}.")
    return 0


def _list(state: GpuStateFile) -> int:
    for gpu in load_library(state).gpus:
        print(f"GPU {gpu.index}: {gpu.name} (UUID: {gpu.uuid})")
    return 0


def main(argv: Sequence[str] | None = None, driver_root: Path | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    state_path = str(driver_root / "gpus.json") if driver_root else os.environ.get(STATE_ENV)
    if not state_path or not Path(state_path).is_file():
        print("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
        return 9
    state = GpuStateFile(Path(state_path))
    if args == ["-L"]:
        return _list(state)
    if len(args) == 3 and args[0] == "-r" and args[1] == "-i":
        return _reset(state, args[2])
    if args[:2] == ["compute-policy", "-i"] and len(args) == 5 and args[3] == "--set-timeslice":
        return _policy(state, args[2], "timeslice", args[4], ("0", "1", "2", "3"))
    if len(args) == 4 and args[0] == "-i" and args[2] == "-c":
        modes = ("DEFAULT", "EXCLUSIVE_PROCESS", "PROHIBITED", "0", "2", "3")
        return _policy(state, args[1], "compute mode", args[3], modes)
    print(f"nvidia-smi stand-in: unsupported arguments {args}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
