"""NVIDIA's DRA kubelet plugin (`gpu-kubelet-plugin` v0.4.1, unmodified) as the process of each
DRA node, and that node's kubelet preparing the claims of its pods through it.

A simulated GPU node served by DRA (`NodeSpec(dra=True)`) runs NVIDIA's binary (built by
`scripts/gobins.py gpu-kubelet-plugin`) inside the node's sandbox (sandbox.py: a private mount
namespace, the node's network namespace where it has one), with its node paths as flags: the
node's driver root (the project's libnvidia-ml.so.1 over the node's GPUs, and what else a
driver root holds: docs/simulated-nvml.md) as `--nvidia-driver-root` and
`--container-driver-root`, the CDI root, and the kubelet's plugin registry and plugins
directories under the node's kubelet root; it reaches the test's API server with a kubeconfig
of its own and publishes the node's ResourceSlices itself. The node's kubelet stand-in
(dramanager.py) registers it over the kubelet's plugin-registration gRPC, and for each pod bound
to the node whose ResourceClaims Kubernetes' scheduler allocated, asks it to
NodePrepareResources them (NodeUnprepareResources once the pod is gone); what it prepared is
what the node's PodResources reports as the containers' dynamic resources. As a kubelet creates
a pod's sandbox only once its claims are prepared, the pod runs only then (KWOK holds it until
`admission.admitted`); a refusal leaves it Pending with the kubelet's
FailedPrepareDynamicResources event, and is tried again after the kubelet's back-off.

Owns `DraPluginRuntime` (the processes, their logs, each node's `DraManager`) and
`DraKubelet` (the control loop's controller that prepares and unprepares claims). Must not:
publish ResourceSlices or allocate claims (NVIDIA's binary and Kubernetes' scheduler do), or
write Node status.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, cast

from tests.kit.kube import ApiError, builds
from tests.kit.node import mpstemplate
from tests.kit.node.admission import admitted, not_prepared
from tests.kit.node.agents import NodeSide
from tests.kit.node.dramanager import ClaimRef, DraManager, PreparedDevice, PrepareError
from tests.kit.node.libnvml.devnodes import make_device_nodes
from tests.kit.node.sandbox import (
    SYSTEM_PATH,
    NodeProgram,
    Sandbox,
    write_mig_capabilities,
    write_proc_devices,
)
from tests.kit.node.stopping import stop_programs
from tests.kit.plane.loop import Change, ControlLoop

Obj = dict[str, Any]
PROGRAM = "gpu-kubelet-plugin"
# What the chart's pod sets as IMAGE_NAME (required; it names the image of MPS daemons it renders)
IMAGE = "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1"
DRIVER = "gpu.nvidia.com"
REGISTRY = "plugins_registry"  # under the node's kubelet root, as /var/lib/kubelet/…
PLUGINS = "plugins"
_REGISTER_TIMEOUT = 120.0
# The kubelet's pod worker tries a pod whose sync failed again after 10 s (workerBackOffPeriod)
_RETRY = 10.0


@dataclass
class _Run:
    node: str
    program: NodeProgram
    log: list[str]


@dataclass(frozen=True)
class PreparedClaim:
    """A claim of a pod on the node, prepared by the driver."""

    namespace: str
    name: str
    uid: str
    devices: tuple[PreparedDevice, ...]


class DraPluginRuntime:
    """NVIDIA's DRA kubelet plugin on every DRA node, and each node's DRA manager."""

    def __init__(
        self,
        sides: dict[str, NodeSide],
        kubeconfig: Callable[[str, Path], None],
        feature_gates: Sequence[str] = (),
        account: tuple[str, str] = ("default", ""),
    ) -> None:
        self.sides = sides  # the DRA nodes' own directories
        self.feature_gates = tuple(feature_gates)  # e.g. "DynamicMIG=true", as the chart sets
        # the chart's NAMESPACE and SERVICE_ACCOUNT_NAME (its pod's own): where MPS control
        # daemons are made, and the account they run as (the binary's defaults: "default", "")
        self.namespace, self.service_account = account
        self._kubeconfig = kubeconfig  # (node, path): writes the plugin's kubeconfig at path
        self.binary = builds.program(PROGRAM)
        self.managers = {name: DraManager(name, registry_dir(side)) for name, side in sides.items()}
        self._runs: dict[str, _Run] = {}
        self._lock = threading.Lock()

    def start(self) -> None:
        for name in self.sides:
            self.managers[name].start()
            self.start_plugin(name)

    def wait_registered(self, timeout: float = _REGISTER_TIMEOUT) -> None:
        """Until every node's plugin registered with its kubelet (it publishes its slices just
        before): a plugin that exits first is reported with its last lines."""
        for name, manager in self.managers.items():
            if not manager.wait_registered(DRIVER, timeout, alive=partial(self._alive, name)):
                raise RuntimeError(
                    f"{PROGRAM} on {name} exited or did not register in {timeout:.0f} s; its last "
                    "lines:\n" + "\n".join(self.log(name)[-20:])
                )

    def _alive(self, node: str) -> bool:
        with self._lock:
            run = self._runs.get(node)
        return run is not None and run.program.exited() is None

    def stop_all(self) -> None:
        with self._lock:
            runs = list(self._runs.values())
            self._runs.clear()
        stop_programs((r.program.process, r.program.reader) for r in runs)
        for manager in self.managers.values():
            manager.stop()

    # ---- the program --------------------------------------------------------------------------

    def start_plugin(self, node: str) -> None:
        side = self.sides[node]
        kubeconfig = side.dir / "dra-plugin.kubeconfig"
        self._kubeconfig(node, kubeconfig)
        root = str(side.driver.path)
        cdi = side.dir / "cdi"
        argv = [
            str(self.binary), f"--node-name={node}", f"--cdi-root={cdi}",
            f"--nvidia-driver-root={root}", f"--container-driver-root={root}",
            f"--nvidia-cdi-hook-path={root}/usr/bin/nvidia-cdi-hook",
            f"--kubelet-registrar-directory-path={registry_dir(side)}",
            f"--kubelet-plugins-directory-path={side.kubelet_root / PLUGINS}",
            f"--kubeconfig={kubeconfig}", f"--image-name={IMAGE}",
            f"--namespace={self.namespace}", f"--service-account-name={self.service_account}",
            "--v=3",  # the helper's start-up steps: a start that stalls says at which
        ]  # fmt: skip
        if self.feature_gates:
            argv.append(f"--feature-gates={','.join(self.feature_gates)}")
        env = {"PATH": SYSTEM_PATH, "NODE_NAME": node}
        # the image's /templates: the MPS control daemon's Deployment (mpstemplate.py)
        sandbox = Sandbox(side.dir, side.network, templates=side.dir / "templates")
        mpstemplate.write(side.dir / "templates")
        write_proc_devices(sandbox.proc_devices)
        sandbox.lay_out()  # the driver's MIG minors
        minors = [g.minor_number for g in side.node.gpus]
        write_mig_capabilities(sandbox.proc_driver, minors)
        # the driver root's dev/: the plugin's device root, whose nodes its CDI specs list
        make_device_nodes(
            side.driver.path, minors, sandbox.proc_driver / "nvidia-caps" / "mig-minors"
        )
        log: list[str] = []
        program = sandbox.spawn(
            argv, env, name=f"dra-{node}", on_line=log.append, log=side.dir / f"{PROGRAM}.log"
        )
        with self._lock:
            old = self._runs.pop(node, None)
            self._runs[node] = _Run(node, program, log)
        program.start(replacing=old.program if old is not None else None)

    def stop_plugin(self, node: str) -> None:
        with self._lock:
            run = self._runs.pop(node, None)
        if run is not None:
            run.program.stop()

    # ---- test handles -------------------------------------------------------------------------

    def log(self, node: str) -> list[str]:
        with self._lock:
            run = self._runs.get(node)
        return list(run.log) if run is not None else []

    def pid(self, node: str) -> int | None:
        """NVIDIA's process itself on `node` (the child of `unshare`), if it runs."""
        with self._lock:
            run = self._runs.get(node)
        return run.program.pid() if run is not None else None


class DraKubelet:
    """The DRA half of every DRA node's kubelet: prepare the claims of pods bound to the node
    (once the scheduler allocated them all), unprepare them when the pod is gone."""

    name = "dra-kubelet"

    def __init__(
        self,
        store: Any,
        runtime: DraPluginRuntime,
        changed: Callable[[str], None],
        loop: ControlLoop | None = None,
    ) -> None:
        self.store = store
        self.runtime = runtime
        self._changed = changed  # the node's PodResources must be written again
        self._loop = loop  # where a refused preparation is tried again
        self.prepared: dict[str, tuple[str, list[PreparedClaim]]] = {}  # pod UID -> node, claims
        self.errors: dict[str, str] = {}  # pod UID -> the driver's refusal
        self._retry_at: dict[str, float] = {}  # pod UID -> when a refused pod is tried again
        self._lock = threading.Lock()

    def keys_for(self, change: Change) -> Iterable[Hashable]:
        if change.resource != "pods":
            return []
        node = (change.obj.get("spec") or {}).get("nodeName")
        uid = change.obj["metadata"]["uid"]
        if node in self.runtime.managers or uid in self.prepared:
            return [(change.namespace, change.name, uid)]
        return []

    def reconcile(self, key: Hashable) -> None:
        namespace, name, uid = cast(tuple[str, str, str], key)
        try:
            pod: Obj | None = self.store.get("pods", name, namespace)
        except ApiError as exc:
            if exc.code != 404:
                raise
            pod = None
        if pod is None or pod["metadata"]["uid"] != uid or _finished(pod):
            self._unprepare(uid)
            return
        if uid in self.prepared or time.monotonic() < self._retry_at.get(uid, 0.0):
            return  # prepared, or refused and waiting out the back-off
        node = str(pod["spec"].get("nodeName") or "")
        manager = self.runtime.managers.get(node)
        claims = self._allocated_claims(pod)
        if manager is None or claims is None:
            return
        if not claims:  # allocated by other drivers only: nothing for NVIDIA's to prepare
            admitted(self.store, pod)
            return
        try:
            done = manager.prepare(
                DRIVER,
                [ClaimRef(namespace, c["metadata"]["uid"], c["metadata"]["name"]) for c in claims],
            )
        except PrepareError as exc:
            self._refused(pod, node, key, str(exc))
            return
        self.errors.pop(uid, None)
        self._retry_at.pop(uid, None)
        with self._lock:
            self.prepared[uid] = (node, [
                PreparedClaim(namespace, c["metadata"]["name"], c["metadata"]["uid"],
                              tuple(done[c["metadata"]["uid"]]))
                for c in claims
            ])  # fmt: skip
        self._changed(node)
        admitted(self.store, pod)  # its sandbox and containers may start now

    def _refused(self, pod: Obj, node: str, key: Hashable, error: str) -> None:
        """The kubelet's answer to a failed NodePrepareResources: the pod's sandbox is not
        created (it stays Pending), an event says why, and the pod is synced again later."""
        uid = pod["metadata"]["uid"]
        self.errors[uid] = error
        self._retry_at[uid] = time.monotonic() + _RETRY
        not_prepared(self.store, pod, node, error)
        if self._loop is not None:
            self._loop.after(_RETRY, self.name, key)

    def _unprepare(self, uid: str) -> None:
        with self._lock:
            entry = self.prepared.pop(uid, None)
        if entry is None:
            return
        node, claims = entry
        manager = self.runtime.managers.get(node)
        if manager is not None:
            refs = [ClaimRef(c.namespace, c.uid, c.name) for c in claims]
            try:
                manager.unprepare(DRIVER, refs)
            except PrepareError as exc:
                self.errors[uid] = str(exc)
        self._changed(node)

    def _allocated_claims(self, pod: Obj) -> list[Obj] | None:
        """The pod's claims, each allocated to this driver; None while one is not allocated."""
        meta, spec, status = pod["metadata"], pod["spec"], pod.get("status") or {}
        generated = {
            s.get("name"): s.get("resourceClaimName")
            for s in status.get("resourceClaimStatuses") or []
        }
        found = []
        for claim in spec.get("resourceClaims") or []:
            name = claim.get("resourceClaimName") or generated.get(claim.get("name"))
            if not name:
                return None
            try:
                obj = self.store.get("resourceclaims", str(name), meta["namespace"])
            except ApiError:
                return None
            results = ((obj.get("status") or {}).get("allocation") or {}).get("devices") or {}
            if not results:
                return None
            if any(r.get("driver") == DRIVER for r in results.get("results") or []):
                found.append(obj)
        return found

    def claims_of(self, uid: str) -> list[PreparedClaim]:
        with self._lock:
            entry = self.prepared.get(uid)
        return list(entry[1]) if entry is not None else []


def registry_dir(side: NodeSide) -> Path:
    return side.kubelet_root / REGISTRY


def container_claims(pod: Obj, prepared: list[PreparedClaim]) -> dict[str, list[PreparedClaim]]:
    """Container name -> the prepared claims it uses (`resources.claims` names the pod's
    claim entries; the claim object's name is the entry's or the one generated for it)."""
    status = pod.get("status") or {}
    generated = {
        s.get("name"): s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or []
    }
    by_entry = {
        c.get("name"): c.get("resourceClaimName") or generated.get(c.get("name"))
        for c in pod["spec"].get("resourceClaims") or []
    }
    by_name = {c.name: c for c in prepared}
    found: dict[str, list[PreparedClaim]] = {}
    for container in pod["spec"].get("containers") or []:
        for used in (container.get("resources") or {}).get("claims") or []:
            claim = by_name.get(str(by_entry.get(used.get("name"))))
            if claim is not None:
                found.setdefault(container["name"], []).append(claim)
    return found


def _finished(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return bool(pod["metadata"].get("deletionTimestamp")) or phase in ("Succeeded", "Failed")


def podresources_claims(kubelet: DraKubelet, pod: Obj) -> dict[str, tuple[Any, ...]]:
    """Container -> the claims the driver prepared for it, as PodResources names them (driver,
    pool, device per prepared device; tests/kit/node/kubelet.py `Claim`)."""
    from tests.kit.node import kubelet as podresources  # lazy: grpc and the product's stubs

    prepared = kubelet.claims_of(pod["metadata"]["uid"])
    return {
        container: tuple(
            podresources.Claim(
                c.name, c.namespace, tuple((d.driver, d.pool, d.device) for d in c.devices)
            )
            for c in claims
        )
        for container, claims in container_claims(pod, prepared).items()
    }
