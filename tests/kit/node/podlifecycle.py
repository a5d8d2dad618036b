"""The simulated kubelet of every node: admission, device allocation, container lives, status.

Owns pods bound to a node (`spec.nodeName`): mounting (a missing, non-optional ConfigMap volume
keeps the pod ContainerCreating until it appears), admission and device allocation through
allocation.py and NVIDIA's device plugin (a rejected pod goes Failed with kubelet's reason and an
Event), starting the programs of some pods (NVIDIA's device plugin and GFD, the agent,
dcgm-exporter) through their `PodRuntime`, crash loops with
kubelet's doubling back-off (10 s to 300 s, scaled by `time_scale`) and restart counts, the
container logs a crash leaves (its reason as the run's last line; the run before a restart kept as
`previous`, when a `LogStore` is given), releasing devices when a pod ends (and, with
`GpuWorkloads`, starting and ending the compute processes of pods that hold GPU devices), pod IPs
from a node's own network namespace where it has one, and writing complete pod status. KWOK
plays the kubelet's pod lifecycle on the real control plane and makes every
bound pod Running, so this keeps only what a node adds: device allocation, the node's
programs, their crash loops and logs, and statuses only for pods running such a program, written
after KWOK has started the pod; but it plays the whole lifecycle of the pods KWOK leaves to it
(annotated LIFECYCLE_BY_TEST). Not to be confused with tests/kit/node/kubelet/, the PodResources
gRPC stand-in fed from `AllocationTable`. Must not schedule pods (the real scheduler does) or
decide what a program does (NVIDIA's binaries do; programs.py, tests/kit/node/).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tests.kit.kube import ApiError
from tests.kit.node import events, podstatus
from tests.kit.node.admission import admitted, awaits_admission, prepared_by_dra
from tests.kit.node.allocation import Allocation, AllocationTable, Rejected, admit
from tests.kit.node.matching import is_terminal
from tests.kit.node.nodes import SimNode
from tests.kit.node.podstatus import ContainerRun, PodPlace
from tests.kit.node.workloads import GpuWorkloads
from tests.kit.plane.containerlogs import LogStore
from tests.kit.plane.kwok import LIFECYCLE_BY_TEST
from tests.kit.plane.loop import Change, ControlLoop
from tests.kit.plane.netns import NodeNetwork
from tests.kit.plane.store import ApiStore

Obj = dict[str, Any]
MAX_BACKOFF = 300.0


class PodRuntime(Protocol):
    """The program some pods run (the kubelet's view of it)."""

    def owns(self, pod: Obj) -> bool: ...
    def start(self, node: str, pod: Obj) -> None: ...
    def stop(self, uid: str) -> None: ...
    def fates(self, uid: str) -> dict[str, str | None]: ...
    def restart(self, uid: str, container: str) -> None: ...


class DevicePlugins(Protocol):
    """The device plugins of every node, as the kubelet's device manager knows them
    (tests/kit/node/nvidiaplugin.py: NVIDIA's own, over the kubelet's gRPC)."""

    def owns(self, pod: Obj) -> bool: ...
    def devices(self, node: str) -> dict[str, tuple[str, ...]]: ...
    def known(self, node: str) -> set[str]: ...
    def allocate(
        self, node: str, allocations: list[Allocation], table: AllocationTable
    ) -> list[Allocation]: ...
    def forget(self, node: str) -> None: ...


@dataclass
class StartedPod:
    node: str
    place: PodPlace
    runtime: PodRuntime | None
    runs: dict[str, ContainerRun] = field(default_factory=dict)
    ref: tuple[str, str] = ("", "")  # namespace, name: where its container logs are kept


class Kubelet:
    """Every node's kubelet, reconciled per node."""

    name = "kubelet"

    def __init__(
        self,
        store: ApiStore,
        loop: ControlLoop,
        nodes: dict[str, SimNode],
        plugin: DevicePlugins,
        runtimes: Sequence[PodRuntime],
        *,
        time_scale: float,
        logs: LogStore | None = None,
        workloads: GpuWorkloads | None = None,
        networks: Mapping[str, NodeNetwork] | None = None,
    ) -> None:
        """`workloads`: the GPU processes of pods holding devices; `networks`: the nodes
        whose pods get their IPs from the node's own network namespace (netns.py)."""
        self.store, self.loop, self.nodes = store, loop, nodes
        self.logs = logs
        self.workloads = workloads
        self.networks = networks if networks is not None else {}  # filled as nodes get them
        self.plugin = plugin
        self.runtimes = list(runtimes)
        self.time_scale = time_scale
        self.table = AllocationTable()
        self._pods: dict[str, StartedPod] = {}
        self._mounting: set[str] = set()  # nodes with pods waiting for a ConfigMap
        self._told: set[str] = set()  # pods whose FailedMount event is out already
        self._ips: dict[str, int] = {}

    def keys_for(self, change: Change) -> Iterable[Hashable]:
        if change.resource == "pods":
            node = (change.obj.get("spec") or {}).get("nodeName")
            return [("node", node)] if node else []
        if change.resource == "nodes":
            return [("node", change.name)]
        if change.resource == "configmaps":
            return [("mounts",)]
        return []

    def reconcile(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        if key[0] == "node":
            self._sync(key[1])
        elif key[0] == "restart":
            self._restart(key[1], key[2])
        elif key[0] == "mounts":
            for node in sorted(self._mounting):
                self._sync(node)

    # ---- one node -------------------------------------------------------------------------

    def _sync(self, node_name: str) -> None:
        try:
            node = self.store.get("nodes", node_name)
        except ApiError:  # the node is gone: its kubelet stops everything it ran
            for uid in [u for u, p in self._pods.items() if p.node == node_name]:
                self._forget(uid)
            self.table.drop_node(node_name)
            self.plugin.forget(node_name)
            return
        pods = self.store.list("pods", field_selector=f"spec.nodeName={node_name}")
        # Plugin pods first, so that a GPU pod admitted in the same pass finds its devices.
        pods.sort(key=lambda p: self._runtime(p) is None)
        self._mounting.discard(node_name)
        active = [
            p for p in pods if not is_terminal(p) and not p["metadata"].get("deletionTimestamp")
        ]
        # KWOK starts the other pods' containers: a pod it has not made Running waits, but for
        # one KWOK holds until this kubelet has admitted it (its devices allocated)
        active = [p for p in active if self._plays(p) or self._admits(p)]
        live = {str(p["metadata"]["uid"]) for p in active}
        # Devices of pods that ended are free before anything new is admitted, as the
        # device manager's UpdateAllocatedDevices does at admission.
        for uid in [u for u, p in self._pods.items() if p.node == node_name and u not in live]:
            self._forget(uid)
        for pod in active:
            uid = str(pod["metadata"]["uid"])
            if uid not in self._pods and not self._start(node, pod):
                continue
            self._write(pod, self._render(pod))

    def _start(self, node: Obj, pod: Obj) -> bool:
        node_name = str(node["metadata"]["name"])
        host_ip = _host_ip(node)
        missing = self._missing_configmap(pod) if self._plays(pod) else None
        if missing:
            self._mounting.add(node_name)
            self._write(pod, podstatus.creating(pod, host_ip, _since(pod)))
            uid = str(pod["metadata"]["uid"])
            if uid not in self._told:
                self._told.add(uid)
                message = (
                    f'MountVolume.SetUp failed for volume "{missing[0]}" : '
                    f'configmap "{missing[1]}" not found'
                )
                events.record(
                    self.store, pod, "FailedMount", message, events.Source("kubelet", node_name)
                )
            return False
        try:
            allocations = admit(
                pod, node, self.plugin.devices(node_name), self.plugin.known(node_name), self.table
            )
            allocations = self.plugin.allocate(node_name, allocations, self.table)
        except Rejected as exc:
            self._write(pod, podstatus.rejected(pod, exc.reason, exc.message, podstatus.now()))
            events.record(
                self.store, pod, exc.reason, exc.message, events.Source("kubelet", node_name)
            )
            return False
        uid = str(pod["metadata"]["uid"])
        self.table.record(node_name, uid, allocations)
        if awaits_admission(pod) and not prepared_by_dra(pod):  # else: once its claims are
            admitted(self.store, pod)  # prepared (draplugin.py)
        place = PodPlace(host_ip, self._pod_ip(node_name), podstatus.now())
        runtime = self._runtime(pod)
        ref = (str(pod["metadata"].get("namespace") or ""), str(pod["metadata"]["name"]))
        self._pods[uid] = StartedPod(node_name, place, runtime, ref=ref)
        if runtime is not None:
            # what it is started with is what this kubelet will report: the pod's IP
            placed = {**pod, "status": {**(pod.get("status") or {}), "podIP": place.pod_ip}}
            runtime.start(node_name, placed)
        if self.workloads is not None:
            self.workloads.started(node_name, pod, allocations)
        return True

    def _forget(self, uid: str) -> None:
        started = self._pods.pop(uid, None)
        if started is None:
            return
        self.table.release(started.node, uid)
        if started.runtime is not None:
            started.runtime.stop(uid)
        if self.workloads is not None:
            self.workloads.stopped(uid)

    # ---- containers ----------------------------------------------------------------------

    def _render(self, pod: Obj) -> Obj:
        uid = str(pod["metadata"]["uid"])
        started = self._pods[uid]
        fates = started.runtime.fates(uid) if started.runtime else {}
        spec = pod.get("spec") or {}
        for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
            name = container["name"]
            run = started.runs.setdefault(name, ContainerRun(started.place.start_time))
            fate = fates.get(name)
            if fate is not None and run.failing is None:
                self._crashed(pod, run, name, fate)
            elif fate is None and run.failing is not None:
                run.failing, run.started_at = None, podstatus.now()
        return podstatus.render(pod, started.place, started.runs)

    def _crashed(self, pod: Obj, run: ContainerRun, name: str, why: str) -> None:
        """A container exited 1: count the restart and wait out its back-off."""
        run.failing, run.finished_at = why, podstatus.now()
        run.restarts += 1
        run.backoff = 10.0
        uid = str(pod["metadata"]["uid"])
        self._log_exit(self._pods[uid], name, why)
        self.loop.after(run.backoff * self.time_scale, self.name, ("restart", uid, name))
        meta = pod["metadata"]
        message = (
            f"Back-off restarting failed container {name} in pod "
            f"{meta['name']}_{meta['namespace']}({uid})"
        )
        events.record(
            self.store, pod, "BackOff", message, events.Source("kubelet", self._pods[uid].node)
        )

    def _restart(self, uid: str, name: str) -> None:
        started = self._pods.get(uid)
        run = started.runs.get(name) if started else None
        if started is None or run is None or run.failing is None:
            return
        self._rotate_log(started, name)
        if started.runtime is not None:
            started.runtime.restart(uid, name)
        fate = (started.runtime.fates(uid) if started.runtime else {}).get(name)
        if fate is None:
            run.failing, run.started_at = None, podstatus.now()
        else:
            run.failing, run.finished_at = fate, podstatus.now()
            self._log_exit(started, name, fate)
            run.restarts += 1
            run.backoff = min(run.backoff * 2, MAX_BACKOFF)
            self.loop.after(run.backoff * self.time_scale, self.name, ("restart", uid, name))
        self._sync(started.node)

    def _log_exit(self, started: StartedPod, name: str, why: str) -> None:
        """A simulated program's last words end its run's log (a real one wrote its own)."""
        if self.logs is not None and not getattr(started.runtime, "writes_own_log", False):
            self.logs.append(*started.ref, name, why)

    def _rotate_log(self, started: StartedPod, name: str) -> None:
        """A restart starts an empty log; the ended run's is then read with previous=true."""
        if self.logs is None:
            return
        ended = self.logs.get(*started.ref, name)
        if ended is not None:
            self.logs.set(*started.ref, name, ended, previous=True)
        self.logs.set(*started.ref, name, "")

    # ---- helpers ----------------------------------------------------------------------

    def _plays(self, pod: Obj) -> bool:
        """Whether this kubelet plays the pod's whole lifecycle: only where KWOK leaves it (a
        test asked for it, LIFECYCLE_BY_TEST)."""
        notes = pod["metadata"].get("annotations") or {}
        return LIFECYCLE_BY_TEST in notes

    def _admits(self, pod: Obj) -> bool:
        """A pod KWOK started, or one waiting for (or past) this kubelet's admission."""
        started = str(pod["metadata"]["uid"]) in self._pods
        return started or _phase(pod) == "Running" or awaits_admission(pod)

    def _runtime(self, pod: Obj) -> PodRuntime | None:
        return next((r for r in self.runtimes if r.owns(pod)), None)

    def _missing_configmap(self, pod: Obj) -> tuple[str, str] | None:
        namespace = str(pod["metadata"]["namespace"])
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            source = volume.get("configMap")
            if not source or source.get("optional"):
                continue
            try:
                self.store.get("configmaps", str(source.get("name")), namespace)
            except ApiError:
                return str(volume.get("name")), str(source.get("name"))
        return None

    def _pod_ip(self, node: str) -> str:
        if node in self.networks:
            return self.networks[node].next_pod_ip()
        index = self.nodes[node].index if node in self.nodes else 250
        self._ips[node] = self._ips.get(node, 1) + 1
        return f"10.244.{index}.{self._ips[node]}"

    def _write(self, pod: Obj, status: Obj) -> None:
        current = pod.get("status") or {}
        if current == status:
            return
        if not self._plays(pod) and status.get("phase") != "Failed":
            started = self._pods.get(str(pod["metadata"]["uid"]))
            if started is None or started.runtime is None:
                return  # KWOK's status stands for pods with no simulated program
            if status.get("phase") == "Pending":
                return  # KWOK would set a Pending pod Running again: an init loop can't show
        body = dict(status)
        body.update({k: None for k in current if k not in status})
        meta = pod["metadata"]
        self.store.patch(
            "pods", meta["name"], {"status": body}, namespace=meta["namespace"], status=True
        )

    def allocations_of(self, node: str) -> list[Any]:
        return self.table.of_node(node)


def _host_ip(node: Obj) -> str:
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address["address"])
    return "10.0.0.1"


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def _since(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("startTime") or podstatus.now())
