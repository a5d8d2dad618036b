"""A simulated GPU node's sandbox: how a node process sees the node's own directories.

A real node's programs find the kubelet's device-plugin directory at the hard-coded
`/var/lib/kubelet/device-plugins/` (NVIDIA's device plugin creates its sockets there whatever
its flags say), and the driver's MIG capability minors under `/proc/driver/nvidia-caps/`.
A process of a simulated node gets both from a private mount namespace of its own (`unshare -m`,
propagation private, so nothing it mounts reaches the host): a tmpfs over `/var/lib` with the
node's device-plugin directory bound at `/var/lib/kubelet/device-plugins`, and the node's
`proc-driver` directory bound over `/proc/driver`, holding the driver's `nvidia-caps/mig-minors`
(what NVIDIA's plugin reads for MIG devices), and its `sys-pci-devices` bound over
`/sys/bus/pci/devices`, one PCI function per GPU (what GFD reads for `gpu.mode` and
`vgpu.present`). Where the node has a network namespace (tests/fakes/cluster/netns.py) the
process joins it first. Needs root and util-linux's `unshare`
and `nsenter`.

Owns `Sandbox` (one node's directories and the command line that runs a program inside),
`write_mig_minors` (the driver's list of MIG capability minors) and `write_pci_devices`. Must
not: mount anything in the host's namespace, or decide what runs inside.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.fakes.cluster.netns import NodeNetwork

DEVICE_PLUGINS = "/var/lib/kubelet/device-plugins"
# The driver's MIG capability minors: NVIDIA's plugin reads this file to map each MIG device's
# capability path to its /dev/nvidia-caps node (it stops without it once a MIG device exists).
MIG_MINORS = "/proc/driver/nvidia-caps/mig-minors"
MAX_GPUS, MAX_GPU_INSTANCES, MAX_COMPUTE_INSTANCES = 32, 15, 8
# The PCI functions of the node's GPUs as sysfs lists them: GFD reads each GPU's class there
# (0x0302xx, a 3D controller: `gpu.mode=compute`).
PCI_DEVICES = "/sys/bus/pci/devices"
_GPU_CLASS = "0x030200"
# $1: the node's device-plugin directory, $2: its /proc/driver stand-in, $3: its PCI devices,
# then the program.
_SETUP = """set -e
mount -t tmpfs -o size=1m,mode=0755 simulated-node /var/lib
mkdir -p /var/lib/kubelet/device-plugins
mount --bind "$1" /var/lib/kubelet/device-plugins
mount --bind "$2" /proc/driver
mount --bind "$3" /sys/bus/pci/devices
shift 3
exec "$@"
"""


def unavailable() -> str | None:
    """Why a node sandbox cannot be made here, or None."""
    if os.geteuid() != 0:
        return "a node sandbox needs root (a private mount namespace per node process)"
    missing = [tool for tool in ("unshare", "nsenter", "mount") if shutil.which(tool) is None]
    if missing:
        return f"a node sandbox needs util-linux's {', '.join(missing)}"
    return None


@dataclass(frozen=True)
class Sandbox:
    """One node's view of the kubelet's and the driver's directories."""

    directory: Path  # the node's own directory on the host (tests/fakes/cluster/agents.py)
    network: NodeNetwork | None = None

    @property
    def device_plugins(self) -> Path:
        """What the node's processes see as /var/lib/kubelet/device-plugins (the node's kubelet
        root is `directory/kubelet`, where the kubelet stand-in's checkpoint is written too)."""
        return self.directory / "kubelet" / "device-plugins"

    @property
    def proc_driver(self) -> Path:
        """What the node's processes see as /proc/driver (the driver's MIG minors)."""
        return self.directory / "proc-driver"

    @property
    def pci_devices(self) -> Path:
        """What the node's processes see as /sys/bus/pci/devices (its GPUs' PCI functions)."""
        return self.directory / "sys-pci-devices"

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv` run inside the node: its network namespace, then a private mount namespace
        (`--kill-child`: the program ends with the `unshare` that a test's kill reaches)."""
        self.device_plugins.mkdir(parents=True, exist_ok=True)
        write_mig_minors(self.proc_driver / "nvidia-caps" / "mig-minors")
        write_pci_devices(self.pci_devices, self.directory / "driver" / "gpus.json")
        inner = [
            "unshare", "--mount", "--propagation", "private", "--fork", "--kill-child",
            "sh", "-c", _SETUP, "node-sandbox", str(self.device_plugins), str(self.proc_driver),
            str(self.pci_devices), *argv,
        ]  # fmt: skip
        return self.network.command(inner) if self.network is not None else inner


def write_mig_minors(path: Path) -> None:
    """The driver's `mig-minors` list: `config` and `monitor`, then for every GPU minor, GPU
    instance and compute instance the driver could create, its capability and a device minor,
    numbered in that order from 3. The numbers only name `/dev/nvidia-caps` nodes, which a
    simulated node does not have (docs/simulated-node.md)."""
    lines = ["config 1", "monitor 2"]
    minor = 3
    for gpu in range(MAX_GPUS):
        for gi in range(MAX_GPU_INSTANCES):
            lines.append(f"gpu{gpu}/gi{gi}/access {minor}")
            minor += 1
            for ci in range(MAX_COMPUTE_INSTANCES):
                lines.append(f"gpu{gpu}/gi{gi}/ci{ci}/access {minor}")
                minor += 1
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_pci_devices(directory: Path, state: Path) -> None:
    """One sysfs PCI function per GPU in the node's state file (`gpus.json`), named by its bus
    ID as NVML reports it: vendor, device and subsystem IDs (from the GPU's PCI IDs), class
    (a 3D controller), NUMA node (none), one empty BAR in `resource` and the config space's
    header; no SR-IOV, IOMMU or driver links (go-nvlib's nvpci reads them as absent)."""
    directory.mkdir(parents=True, exist_ok=True)
    try:
        gpus = json.loads(state.read_text(encoding="utf-8")).get("gpus") or []
    except (OSError, ValueError):
        gpus = []
    for gpu in gpus:
        pci = gpu.get("pci") or {}
        function = directory / str(pci.get("bus_id", ""))[-12:].lower()
        device, subsystem = (
            int(pci.get("device_id", "0"), 16),
            int(pci.get("subsystem_id", "0"), 16),
        )
        function.mkdir(exist_ok=True)
        files = {
            "vendor": f"0x{device & 0xFFFF:04x}",
            "device": f"0x{device >> 16:04x}",
            "subsystem_vendor": f"0x{subsystem & 0xFFFF:04x}",
            "subsystem_device": f"0x{subsystem >> 16:04x}",
            "class": _GPU_CLASS,
            "numa_node": "-1",
            "resource": "0x0000000000000000 0x0000000000000000 0x0000000000000000",
        }
        for name, text in files.items():
            (function / name).write_text(text + "\n", encoding="ascii")
        (function / "config").write_bytes(_config_space(device, subsystem))


def _config_space(device: int, subsystem: int) -> bytes:
    """A type-0 PCI header (256 bytes, what sysfs gives root): IDs and class, and no
    capability list, so no vendor-specific capability (a GPU passed to a vGPU guest has one:
    GFD's `vgpu.present`)."""
    header = bytearray(256)
    header[0:4] = device.to_bytes(4, "little")  # vendor ID, then device ID
    header[9:12] = int(_GPU_CLASS, 16).to_bytes(3, "little")  # prog-if, subclass, base class
    header[0x2C:0x30] = subsystem.to_bytes(4, "little")  # subsystem vendor, subsystem ID
    return bytes(header)
