"""The device nodes a simulated node's driver root holds under `dev/`, as a containerised driver's
root (`/run/nvidia/driver`) does on a real node (test code only).

NVIDIA's DRA kubelet plugin takes a driver root holding `dev/` as its device root, and the CDI
specs it writes for a prepared claim (through nvidia-container-toolkit's nvcdi) list the device
nodes the container gets: the control nodes `nvidiactl`, `nvidia-modeset`, `nvidia-uvm`,
`nvidia-uvm-tools`, one `nvidia<minor>` per GPU and, for a MIG device, the
`nvidia-caps/nvidia-cap<N>` nodes of its GPU and compute instances (N from the driver's
`mig-minors` list, tests/kit/node/sandbox.py). nvcdi reads each node's type and numbers with
stat, so they are real character device nodes (`mknod`, root only); nothing on this machine
serves their major numbers, so opening one fails (ENXIO), and nothing opens them. A spec without
any node is refused ("invalid device, empty device edits"), which is what a driver root without
`dev/` gave (docs/simulated-dra.md).

Owns `make_device_nodes`. Must not: create anything outside the driver root, or write GPU state.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

NVIDIA_MAJOR = 195  # the driver's fixed major: /dev/nvidia<minor>, nvidiactl 255, modeset 254
# nvidia-uvm's and nvidia-caps' majors are dynamic (/proc/devices on the host); any unused ones do
UVM_MAJOR = 508
CAPS_MAJOR = 509
CONTROL = {"nvidiactl": (NVIDIA_MAJOR, 255), "nvidia-modeset": (NVIDIA_MAJOR, 254),
           "nvidia-uvm": (UVM_MAJOR, 0), "nvidia-uvm-tools": (UVM_MAJOR, 1)}  # fmt: skip


def make_device_nodes(driver_root: Path, gpu_minors: Iterable[int], mig_minors: Path) -> Path:
    """Create `<driver_root>/dev` with the control nodes, each GPU's node and, for those GPUs,
    the MIG capability nodes `mig_minors` numbers; return the directory."""
    dev = driver_root / "dev"
    dev.mkdir(parents=True, exist_ok=True)
    minors = sorted(set(gpu_minors))
    for name, (major, minor) in CONTROL.items():
        _node(dev / name, major, minor)
    for minor in minors:
        _node(dev / f"nvidia{minor}", NVIDIA_MAJOR, minor)
    caps = dev / "nvidia-caps"
    caps.mkdir(exist_ok=True)
    wanted = tuple(f"gpu{m}/" for m in minors)
    for line in mig_minors.read_text(encoding="utf-8").splitlines():
        name, _, number = line.partition(" ")
        if name.startswith(wanted) or name in ("config", "monitor"):
            _node(caps / f"nvidia-cap{int(number)}", CAPS_MAJOR, int(number))
    return dev


def _node(path: Path, major: int, minor: int) -> None:
    if path.exists():
        return
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
