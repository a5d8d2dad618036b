"""The agent's on-demand reading for `kubectl gpu top`: NVML per process, host /proc, kubelet.

Owns one reading (`UsageReader.read`): NVML's GPUs, MIG devices and compute processes
(`nvml.Session.usage`), each process's pod and container from `<proc-root>/<pid>/cgroup`
(host PIDs: NVML knows no PID namespace, so the agent runs with `hostPID` or reads a host
/proc mounted elsewhere, `--proc-root`), and the devices kubelet handed to each container
(checkpoint and PodResources, joined as for `map`), into a `usage.document.NodeUsage`. A
reading is kept `FRESH` seconds, so that a burst of requests costs NVML one reading. The
cgroup file is read bounded and only by PID: never a command line, environment or any other
file of a process. Also owns the sampler behind `top --idle` (one reading every interval
into a bounded ring). Must not decide anything (`usage.view` joins, `usage.samples` judges).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from kubectl_gpu import __version__, nvml
from kubectl_gpu.agent import reporting
from kubectl_gpu.errors import DeviceError
from kubectl_gpu.gpumap import deviceid, join
from kubectl_gpu.gpumap.report import timestamp
from kubectl_gpu.usage import cgroups, samples
from kubectl_gpu.usage.document import Attributed, Held, NodeUsage
from kubectl_gpu.usage.readings import GpuReading, ProcessReading

log = logging.getLogger(__name__)

DEFAULT_PROC_ROOT = Path("/proc")
FRESH = 1.0  # seconds a reading answers every request
SM_WINDOW_US = 10_000_000  # per-process SM % is the mean of NVML's samples of the last 10 s


@dataclasses.dataclass(frozen=True)
class UsageSources:
    """Where the node's facts are: kubelet's root (via `reporting.Sources`) and host /proc."""

    kubelet: reporting.Sources
    proc_root: Path = DEFAULT_PROC_ROOT


class UsageReader:
    """Reads the node on demand, one reading at a time, each kept `FRESH` seconds."""

    def __init__(self, sources: UsageSources, clock: Callable[[], float] = time.time) -> None:
        self.sources = sources
        self.clock = clock
        self._lock = threading.Lock()
        self._last: tuple[float, NodeUsage] | None = None

    def read(self) -> NodeUsage:
        """The node's usage now (or at most FRESH seconds ago)."""
        with self._lock:
            now = self.clock()
            if self._last is not None and 0 <= now - self._last[0] < FRESH:
                return self._last[1]
            reading = self._read(now)
            self._last = (now, reading)
            return reading

    def _read(self, now: float) -> NodeUsage:
        problems: list[str] = []
        gpus: tuple[GpuReading, ...] = ()
        try:
            with nvml.session() as device:
                gpus = device.usage(int(now * 1e6) - SM_WINDOW_US)
        except DeviceError as e:
            log.warning("usage without NVML: %s", e.message)
            problems.append(f"NVML could not be read: {e.message}")
        processes = tuple((g.uuid, self._attributed(p)) for g in gpus for p in g.processes)
        held = _held(reporting.read_node_sources(self.sources.kubelet), gpus)
        read_at = timestamp(dt.datetime.fromtimestamp(now, dt.timezone.utc))
        node = self.sources.kubelet.node
        return NodeUsage(node, __version__, read_at, gpus, processes, held, tuple(problems))

    def _attributed(self, process: ProcessReading) -> Attributed:
        found = cgroups.parse(read_cgroup(self.sources.proc_root, process.pid))
        if found is None:
            return Attributed(process)
        return Attributed(process, found.pod_uid, found.container_id)


def read_cgroup(proc_root: Path, pid: int) -> str:
    """`<proc_root>/<pid>/cgroup`, at most `cgroups.MAX_BYTES`; "" when it cannot be read
    (the process ended, or /proc is not the host's). Only a PID NVML gave is read, so no
    path from outside reaches the file system."""
    if pid <= 0:
        return ""
    try:
        fd = os.open(proc_root / str(int(pid)) / "cgroup", os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return ""
    try:
        return os.read(fd, cgroups.MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def _held(sources: join.NodeSources, gpus: tuple[GpuReading, ...]) -> tuple[Held, ...]:
    """The devices kubelet handed out, each resolved to its GPU / MIG device as `map` does,
    with how many replicas the plugin advertises of that physical device."""
    from kubectl_gpu.gpumap.allocations import Gpu, MigDevice

    inventory = [
        Gpu(
            g.index,
            g.uuid,
            g.model,
            None,
            tuple(
                MigDevice(m.uuid, m.profile, m.gpu_instance, m.compute_instance)
                for m in g.mig_devices
            ),
        )
        for g in gpus
    ]
    node_map = join.make(sources, (), inventory or None)
    replicas: dict[tuple[str, str], int] = {}
    for row in (*node_map.rows, *node_map.free):
        if row.replica is not None:
            key = (row.resource, deviceid.parse(row.device_id).physical)
            replicas[key] = replicas.get(key, 0) + 1
    return tuple(
        Held(
            r.device_id,
            r.resource,
            r.source,
            r.gpu_uuid,
            r.mig_uuid,
            r.replica,
            replicas.get((r.resource, deviceid.parse(r.device_id).physical)),
            r.namespace,
            r.pod,
            r.pod_uid,
            r.container,
        )
        for r in node_map.rows
    )


class Sampler:
    """Every `interval` seconds, one reading into the ring behind `top --idle`; the only
    NVML reading the agent makes unasked (docs/top.md gives its memory)."""

    def __init__(self, reader: UsageReader, interval: float, capacity: int) -> None:
        self.reader, self.interval = reader, interval
        self.ring = samples.Ring(capacity)
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="usage-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def sample(self) -> None:
        """Take one round of samples now."""
        from kubectl_gpu.usage import view

        reading = self.reader.read()
        at = self.reader.clock()
        taken = [
            (
                samples.Holder(r.device_id or "", r.namespace, r.pod, r.pod_uid, r.container),
                samples.Sample(at, r.memory_used, r.sm_percent, r.sm_unavailable),
            )
            for r in view.make(reading, (), None)
            if r.kind == view.POD and r.device_id is not None
        ]
        with self.lock:
            self.ring.add(taken)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sample()
            except Exception as e:  # noqa: BLE001 - a failed sample must not end the agent
                log.warning("usage sample failed: %s: %s", type(e).__name__, e)
