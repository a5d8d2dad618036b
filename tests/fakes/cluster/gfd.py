"""Simulated GPU Feature Discovery: the `nvidia.com/*` node labels GFD v0.19.3 writes.

Owns the label set GFD writes for a node's GPUs under a loaded config (the driver's and CUDA's
versions as the node's NVML library reports them, in both of GFD's spellings; product with spaces
turned into `-` and `-SHARED` only when shared and not renamed, count, memory in MiB, family,
compute capability, replicas, sharing-strategy, mig.capable, mps.capable, mig.strategy, the
per-profile `nvidia.com/mig-<profile>.*` labels under mixed and the overridden `gpu.*` labels
(or `-MIG-INVALID`) under single), and `GfdRuntime`, which runs GFD in its pods with the same
config-manager flow as the plugin and relabels every `sleepInterval` (scaled). Labels are
written straight to the Node, as NFD's master would. Checked against GFD v0.19.3 run on a real
H200 (tests/data/nvidia/, tests/harness/test_sim_gfd_labels_an_h200_as_nvidias_gfd_did.py) and
against NVIDIA's GFD itself on simulated nodes, where every difference is named
(tests/harness/test_sim_gfd_stand_in_differs_from_nvidias_gfd_only_where_named.py). Clusters
running NVIDIA's device plugin run NVIDIA's GFD instead (tests/fakes/node/nvidiagfd.py), so
`GfdRuntime` labels only clusters on the Python plugin stand-in.
Must not touch node status.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Sequence

from tests.controlplane.store import ApiStore
from tests.fakes.cluster.loop import Change, ControlLoop
from tests.fakes.cluster.nodes import GpuView, MigDeviceView, SimNode
from tests.fakes.cluster.pluginconfig import ConfigError, PluginConfig, Sharing, load
from tests.fakes.cluster.programs import ConfigView, ProgramPod, ProgramRuntime
from tests.fakes.libnvml.driver import DRIVER_VERSION
from tests.fakes.libnvml.symbols import InventorySymbols
from tests.kube import ApiError

GPU = "nvidia.com/gpu"
# What the node's NVML answers (nvmlSystemGetCudaDriverVersion: 13000 is CUDA 13.0).
CUDA_VERSION = divmod(InventorySymbols.cuda_driver_version // 10, 100)
Labels = dict[str, str]


class GfdError(Exception):
    """GFD logs this and exits 1."""


def _sanitise(text: str) -> str:
    return "-".join(re.sub(r"[^A-Za-z0-9-_. ]", "", text).split())


def _family(major: int, minor: int) -> str:
    names = {1: "tesla", 2: "fermi", 3: "kepler", 5: "maxwell", 6: "pascal", 9: "hopper"}
    if major == 7:
        return "volta" if minor < 5 else "turing"
    if major == 8:
        return "ampere" if minor < 9 else "ada-lovelace"
    return names.get(major, "blackwell" if major >= 10 else "undefined")


def _resource(name: str, sharing: Sharing | None, count: int, parts: Sequence[str]) -> Labels:
    """product, count, replicas and sharing-strategy of one resource (resource.go)."""
    wanted = sharing.replicas_of(name) if sharing else None
    replicas = 0 if sharing is None else (wanted.replicas if wanted else 1)
    product = "-".join(_sanitise(p) for p in parts if p)
    if wanted and wanted.replicas > 1 and not wanted.rename:
        product += "-SHARED"
    strategy = sharing.strategy if sharing is not None and replicas > 1 else "none"
    return {
        f"{name}.product": product,
        f"{name}.count": str(count),
        f"{name}.replicas": str(replicas),
        f"{name}.sharing-strategy": strategy,
    }


def _full_gpu(gpu: GpuView, sharing: Sharing | None, count: int) -> Labels:
    labels = _resource(GPU, sharing, count, [gpu.name])
    major, minor = gpu.compute_capability
    labels[f"{GPU}.memory"] = str(gpu.memory_mib)
    labels.update(
        {
            f"{GPU}.family": _family(major, minor),
            f"{GPU}.compute.major": str(major),
            f"{GPU}.compute.minor": str(minor),
        }
    )
    return labels


def _mig(name: str, model: str, mig: MigDeviceView, sharing: Sharing, count: int) -> Labels:
    labels = _resource(name, sharing, count, [model, "MIG", mig.profile])
    attributes = {
        "memory": mig.memory_mb,
        "multiprocessors": mig.multiprocessors,
        "slices.gi": mig.gi_slices,
        "slices.ci": mig.ci_slices,
        **{f"engines.{k}": v for k, v in mig.engines.items()},
    }
    labels.update({f"{name}.{k}": str(v) for k, v in attributes.items()})
    return labels


def labels_for(gpus: Sequence[GpuView], config: PluginConfig) -> Labels:
    """Every label GFD writes for `gpus` under `config` (GfdError when GFD would exit)."""
    if not gpus:
        return {}
    major, minor = CUDA_VERSION
    driver = DRIVER_VERSION.split(".")
    labels: Labels = {
        # GFD writes the versions twice: the older names and the `-version` ones
        "nvidia.com/cuda.driver.major": driver[0],
        "nvidia.com/cuda.driver.minor": driver[1],
        "nvidia.com/cuda.driver.rev": driver[2],
        "nvidia.com/cuda.driver-version.major": driver[0],
        "nvidia.com/cuda.driver-version.minor": driver[1],
        "nvidia.com/cuda.driver-version.revision": driver[2],
        "nvidia.com/cuda.driver-version.full": DRIVER_VERSION,
        "nvidia.com/cuda.runtime.major": str(major),
        "nvidia.com/cuda.runtime.minor": str(minor),
        "nvidia.com/cuda.runtime-version.major": str(major),
        "nvidia.com/cuda.runtime-version.minor": str(minor),
        "nvidia.com/cuda.runtime-version.full": f"{major}.{minor}",
        "nvidia.com/gpu.mode": "compute",
        # from /sys/class/dmi/id/product_name, which a simulated node does not have
        "nvidia.com/gpu.machine": "unknown",
        "nvidia.com/vgpu.present": "false",
        "nvidia.com/mig.capable": str(any(g.mig_capable for g in gpus)).lower(),
        "nvidia.com/mps.capable": "false",
    }
    if config.sharing.strategy == "mps":
        if any(g.mig_enabled for g in gpus):
            raise GfdError(
                "failed to check MPS-capable: MPS sharing is not supported for mig devices"
            )
        labels["nvidia.com/mps.capable"] = "true"
    # MIG-enabled GPUs are labelled without sharing; full GPUs override them (mig-strategy.go).
    for enabled in (True, False):
        same = [g for g in gpus if g.mig_enabled == enabled]
        if same:
            labels.update(_full_gpu(same[0], None if enabled else config.sharing, len(same)))
    strategy = config.mig_strategy
    if strategy in ("single", "mixed"):
        labels["nvidia.com/mig.strategy"] = strategy
        labels.update(_single(gpus, config) if strategy == "single" else _mixed(gpus, config))
    return labels


def _mixed(gpus: Sequence[GpuView], config: PluginConfig) -> Labels:
    labels: Labels = {}
    by_profile: dict[str, list[tuple[GpuView, MigDeviceView]]] = {}
    for gpu in gpus:
        for mig in gpu.mig_devices:
            by_profile.setdefault(mig.profile, []).append((gpu, mig))
    for profile, found in by_profile.items():
        name = "nvidia.com/mig-" + profile.replace("+", ".")
        gpu, mig = found[0]
        labels.update(_mig(name, gpu.name, mig, config.sharing, len(found)))
    return labels


def _single(gpus: Sequence[GpuView], config: PluginConfig) -> Labels:
    enabled = [g for g in gpus if g.mig_enabled]
    if not enabled:
        return {}
    migs = [(g, m) for g in enabled for m in g.mig_devices]
    valid = (
        len(enabled) == len(gpus)
        and all(g.mig_devices for g in enabled)
        and len({m.profile for _, m in migs}) == 1
    )
    if not valid:
        product = f"{_sanitise(enabled[0].name)}-MIG-INVALID"
        return {
            f"{GPU}.product": product,
            f"{GPU}.count": "0",
            f"{GPU}.replicas": "0",
            f"{GPU}.memory": "0",
        }
    gpu, mig = migs[0]
    return _mig(GPU, gpu.name, mig, config.sharing, len(migs))


class GfdRuntime(ProgramRuntime):
    """GFD in its pods: labels at start, on SIGHUP and every (scaled) sleepInterval."""

    name = "gfd"
    container_names = ("gpu-feature-discovery-ctr", "gpu-feature-discovery")
    program = "gpu-feature-discovery"

    def __init__(
        self, store: ApiStore, loop: ControlLoop, nodes: dict[str, SimNode], time_scale: float
    ) -> None:
        super().__init__(store, loop, nodes)
        self.time_scale = time_scale
        self._written: dict[str, set[str]] = {}

    def keys_for(self, change: Change) -> Iterable[Hashable]:
        return ()  # GFD reacts to its own timer and to its config-manager, not to changes

    def reconcile(self, key: Hashable) -> None:
        state = self.pods.get(str(key))
        if state is not None and state.running:
            self._relabel(state)
            self.changed(state.node)

    def _load(self, state: ProgramPod, view: ConfigView) -> None:
        text, error = self.config_text(state, view)
        try:
            if error is not None:
                raise ConfigError(error)
            state.config = load(text, state.setup.env, gfd=True)
        except ConfigError as exc:
            state.main_error = f"unable to load config: {exc}"
            return
        state.main_error = None
        self._relabel(state)

    def _relabel(self, state: ProgramPod) -> None:
        node = self.nodes.get(state.node)
        gpus = node.gpu_views() if node else ()
        try:
            if not gpus and state.config.fail_on_init_error:
                raise GfdError("error creating NVML labeler: failed to initialize NVML")
            labels = labels_for(gpus, state.config)
        except GfdError as exc:
            state.main_error = str(exc)
            return
        state.result = labels
        self._write(state.node, labels)
        interval = state.config.sleep_interval
        if interval is not None:
            self.loop.after(interval * self.time_scale, self.name, state.uid)

    def _write(self, node: str, labels: Labels) -> None:
        stale = self._written.get(node, set()) - set(labels)
        try:
            current = self.store.get("nodes", node)["metadata"].get("labels") or {}
        except ApiError:
            return
        if all(current.get(k) == v for k, v in labels.items()) and not stale & set(current):
            self._written[node] = set(labels)
            return
        body = {"metadata": {"labels": {**labels, **{k: None for k in stale}}}}
        self.store.patch("nodes", node, body)
        self._written[node] = set(labels)
