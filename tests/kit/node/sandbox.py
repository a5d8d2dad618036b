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
`vgpu.present`). A program that reads a file of its image at a path the host lacks
(`Sandbox.templates`: NVIDIA's DRA plugin's `/templates`) runs chrooted into a root of the
node's own, made of bind mounts of the host's `/` plus that directory. Where the node has a
network namespace (tests/kit/plane/netns.py) the process joins it first. Needs root and
util-linux's `unshare` and `nsenter`.

Owns `Sandbox` (one node's directories, the command line that runs a program inside and
`spawn`, the one way a node program is started), `NodeProgram` (one run: its process, the
thread that reads its output, finding and stopping it), `with_parent_death` and `find_program`
(ending a node program with the test, finding it below its `unshare`; stopping one is
stopping.py's), the driver's /proc files (`write_mig_minors`, `write_mig_capabilities`,
`write_proc_devices`) and the GPUs' sysfs PCI functions (`write_pci_devices`). Must not: mount
anything in the host's namespace, or decide what runs inside.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.kit.node.stopping import STOP_GRACE, stop_program
from tests.kit.plane.netns import NodeNetwork

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
# $4: its /proc/devices stand-in or "" (the host's stays), $5: what it shows at /templates or ""
# (then the program runs chrooted into $6, a copy of the host's root made of bind mounts with
# /templates added: a directory at / cannot be made without writing the host's root file
# system; $6 is unbindable, so the recursive binds leave it out of its own copy), then the program.
_SETUP = """set -e
mount -t tmpfs -o size=1m,mode=0755 simulated-node /var/lib
mkdir -p /var/lib/kubelet/device-plugins
mount --bind "$1" /var/lib/kubelet/device-plugins
mount --bind "$2" /proc/driver
mount --bind "$3" /sys/bus/pci/devices
if [ -n "$4" ]; then mount --bind "$4" /proc/devices; fi
if [ -n "$5" ]; then
  root="$6"
  mount -t tmpfs -o size=1m,mode=0755 simulated-root "$root"
  mount --make-unbindable "$root"
  for entry in /*; do
    name="${entry#/}"
    if [ -L "$entry" ]; then ln -s "$(readlink "$entry")" "$root/$name"
    elif [ -d "$entry" ]; then mkdir "$root/$name"; mount --rbind "$entry" "$root/$name"
    elif [ -f "$entry" ]; then : > "$root/$name"; mount --bind "$entry" "$root/$name"
    fi
  done
  mkdir "$root/templates"
  mount --bind "$5" "$root/templates"
  shift 6
  exec chroot "$root" sh -c 'cd "$1" && shift && exec "$@"' node-root "$PWD" "$@"
fi
shift 6
exec "$@"
"""
# The driver's character devices as /proc/devices lists them: nvidia's major is fixed, the
# others are dynamic on a real host (the numbers of tests/kit/node/libnvml/devnodes.py)
DRIVER_DEVICES = ("195 nvidia", "508 nvidia-uvm", "509 nvidia-caps")
# What a node program finds on PATH besides what its container adds (the driver's utilities)
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


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

    directory: Path  # the node's own directory on the host (tests/kit/node/agents.py)
    network: NodeNetwork | None = None
    templates: Path | None = None  # what the node's programs see at /templates, if anything

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

    @property
    def proc_devices(self) -> Path:
        """What the node's processes see as /proc/devices, where the node has one
        (`write_proc_devices`); otherwise they see the host's."""
        return self.directory / "proc-devices"

    @property
    def root(self) -> Path:
        """Where the node's programs find their root directory when it shows `templates`."""
        return self.directory / "root"

    def lay_out(self) -> None:
        """The node's directories as its programs see them: the device-plugin directory, the
        driver's MIG minors (what `write_mig_capabilities` numbers from) and the GPUs' PCI
        functions (`command` lays them out; a caller that writes more there first calls it)."""
        self.device_plugins.mkdir(parents=True, exist_ok=True)
        if self.templates is not None:
            self.root.mkdir(exist_ok=True)
        write_mig_minors(self.proc_driver / "nvidia-caps" / "mig-minors")
        write_pci_devices(self.pci_devices, self.directory / "driver" / "gpus.json")

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv` run inside the node: its network namespace, then a private mount namespace
        (`--kill-child`: the program ends with the `unshare` that a test's kill reaches)."""
        self.lay_out()
        inner = [
            "unshare", "--mount", "--propagation", "private", "--fork", "--kill-child",
            "sh", "-c", _SETUP, "node-sandbox", str(self.device_plugins), str(self.proc_driver),
            str(self.pci_devices),
            str(self.proc_devices) if self.proc_devices.is_file() else "",
            str(self.templates or ""), str(self.root), *argv,
        ]  # fmt: skip
        return self.network.command(inner) if self.network is not None else inner

    def spawn(  # noqa: PLR0913 - what differs between the node's programs, each by name
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        *,
        name: str,
        on_line: Callable[[str], None],
        on_exit: Callable[[], None] | None = None,
        log: Path | None = None,
    ) -> NodeProgram:
        """Start `argv` inside the node (`command`) in the node's directory, with `env` as its
        whole environment, in a session of its own (what `stop_program` signals) that ends with
        the test. Each line of its output (stdout and stderr, as a container's log) goes to
        `on_line` and, where given, is appended to the file `log`; `on_exit` is called once the
        output has ended and the process with it. Nothing is read before `NodeProgram.start`:
        keep the run first, where `on_exit`'s look will find it."""
        process = subprocess.Popen(  # noqa: S603 (fixed argv, no shell)
            with_parent_death(self.command(argv)),
            cwd=self.directory,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        return NodeProgram(Path(argv[0]).name, process, name, on_line, on_exit, log)


class NodeProgram:
    """One run of a program in a node's sandbox: its process and the thread that reads its
    output (`Sandbox.spawn`)."""

    def __init__(  # noqa: PLR0913 - Sandbox.spawn's parts, passed on as they are
        self,
        program: str,
        process: subprocess.Popen[str],
        name: str,
        on_line: Callable[[str], None],
        on_exit: Callable[[], None] | None,
        log: Path | None,
    ) -> None:
        self.program = program  # the executable's name, to find it below its `unshare`
        self.process = process
        self.reader = threading.Thread(target=self._read, name=name, daemon=True)
        self._on_line, self._on_exit, self._log = on_line, on_exit, log

    def start(self, replacing: NodeProgram | None = None) -> None:
        """Read its output from now on; then stop the run it replaces (a restarted
        container's), so the two never read into one log at once for long."""
        self.reader.start()
        if replacing is not None:
            replacing.stop()

    def exited(self) -> int | None:
        """Its exit code, or None while it runs."""
        return self.process.poll()

    def pid(self) -> int | None:
        """The program's own process (below the `unshare` and `nsenter` that started it) while
        it runs, else None."""
        if self.exited() is not None:
            return None
        return find_program(self.process.pid, self.program)

    def stop(self) -> None:
        stop_program(self.process, self.reader)

    def _read(self) -> None:
        output = self.process.stdout
        assert output is not None
        with contextlib.ExitStack() as files:
            keep = None
            if self._log is not None:
                keep = files.enter_context(self._log.open("a", encoding="utf-8"))
            for line in output:
                self._on_line(line.rstrip("\n"))
                if keep is not None:
                    keep.write(line)
                    keep.flush()
        output.close()
        # The pipe closes while the process exits, a moment before it can be waited for: wait,
        # so that whoever looks at it next (`on_exit`: the kubelet) sees it ended.
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(STOP_GRACE)
        if self._on_exit is not None:
            self._on_exit()


def with_parent_death(command: list[str]) -> list[str]:
    """The program ends with the test that started it: `setpriv --pdeathsig` on `nsenter` and
    `unshare` (which exec into each other), and `unshare --kill-child` for the program."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM", "--", *command] if setpriv else command


def find_program(pid: int, name: str, depth: int = 4) -> int | None:
    """The process running executable `name` at or below `pid` (a program's own pid below the
    `unshare` that started it), or None."""
    try:
        if Path(os.readlink(f"/proc/{pid}/exe")).name == name:
            return pid
    except OSError:
        return None
    if depth == 0:
        return None
    for child in _children(pid):
        found = find_program(child, name, depth - 1)
        if found is not None:
            return found
    return None


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text(encoding="ascii")
    except OSError:
        return []
    return [int(p) for p in text.split()]


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
    _write(path, ("\n".join(lines) + "\n").encode())


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
            _write(function / name, (text + "\n").encode())
        _write(function / "config", _config_space(device, subsystem))


def _config_space(device: int, subsystem: int) -> bytes:
    """A type-0 PCI header (256 bytes, what sysfs gives root): IDs and class, and no
    capability list, so no vendor-specific capability (a GPU passed to a vGPU guest has one:
    GFD's `vgpu.present`)."""
    header = bytearray(256)
    header[0:4] = device.to_bytes(4, "little")  # vendor ID, then device ID
    header[9:12] = int(_GPU_CLASS, 16).to_bytes(3, "little")  # prog-if, subclass, base class
    header[0x2C:0x30] = subsystem.to_bytes(4, "little")  # subsystem vendor, subsystem ID
    return bytes(header)


def write_mig_capabilities(proc_driver: Path, gpu_minors: list[int]) -> None:
    """The driver's `nvidia/capabilities/gpu<G>/mig/gi<I>[/ci<C>]/access` files for the given GPU
    minors, each naming its `/dev/nvidia-caps` minor as `mig-minors` numbers it (`DeviceFileMinor`,
    `DeviceFileMode` 292 = 0444, `DeviceFileModify` 1): what NVIDIA's DRA plugin reads to give a
    container a MIG device's capability nodes. Call after `lay_out` wrote `mig-minors`."""
    minors = proc_driver / "nvidia-caps" / "mig-minors"
    wanted = tuple(f"gpu{m}/" for m in gpu_minors)
    for line in minors.read_text(encoding="utf-8").splitlines():
        name, _, number = line.partition(" ")
        if not name.startswith(wanted):
            continue
        gpu, rest = name.split("/", 1)  # gpu0, gi2/access or gi2/ci0/access
        path = proc_driver / "nvidia" / "capabilities" / gpu / "mig" / rest
        path.parent.mkdir(parents=True, exist_ok=True)
        text = f"DeviceFileMinor: {int(number)}\nDeviceFileMode: 292\nDeviceFileModify: 1\n"
        _write(path, text.encode())


def write_proc_devices(path: Path) -> None:
    """The host's /proc/devices with the driver's character devices added (NVIDIA's DRA plugin
    looks up the `nvidia-caps` major there); bound over /proc/devices inside the sandbox."""
    lines = Path("/proc/devices").read_text(encoding="ascii").splitlines()
    at = lines.index("Character devices:") + 1 if "Character devices:" in lines else 0
    known = {line.split()[-1] for line in lines if line.strip()}
    added = [f"{n:>3} {name}" for n, name in map(str.split, DRIVER_DEVICES) if name not in known]
    _write(path, ("\n".join([*lines[:at], *added, *lines[at:]]) + "\n").encode())


def _write(path: Path, data: bytes) -> None:
    """Write a file the node's running programs may be reading: each program's start lays the
    node out again (GFD's beside the plugin's when a rollout restarts both), so a reader must
    see the old bytes or the new, never a file cut short; unchanged bytes are left alone."""
    with contextlib.suppress(OSError):
        if path.read_bytes() == data:
            return
    partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    partial.write_bytes(data)
    os.replace(partial, path)
