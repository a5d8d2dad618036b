"""A node's GPUs as a MIG config sees them, and which specs of a config select each GPU.

Owns `NodeGpu` / `Target` (the GPUs of a real node, or of a hypothetical one made of a model
named on the command line), building them from a model name, from a Node's GPU Feature
Discovery labels or from live `MigState`, and `select`: mig-parted's walk over a config's
specs (docs/upstream-facts.md M1.3): a spec selects a GPU when its device-filter matches the GPU's
PCI IDs (or is empty) and `devices` is `all` or lists the GPU's index; every selecting spec is
applied in turn, so the last one wins. Must not decide whether a layout fits (verdicts.py,
fit.py), nor read the cluster. Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from kubectl_gpu import keys, numbers
from kubectl_gpu.errors import GpuError, UsageError
from kubectl_gpu.mig import models
from kubectl_gpu.mig.models import GpuModel, Product
from kubectl_gpu.mig.spec import MigDeviceSpec

if TYPE_CHECKING:  # only the node agent's path builds targets from live state
    from kubectl_gpu.mig.state import MigState

# GPU Feature Discovery's physical GPU count (docs/upstream-facts.md P2.3).
# TODO(lead): move to keys.py, which this change may not edit.
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
_SHARED_SUFFIX = "-SHARED"  # GFD appends it when the GPU is time-sliced and not renamed
_MIG_INFIX = "-MIG-"  # GFD's product under migStrategy single: <model>-MIG-<profile>
MAX_GPUS = 64  # more than any node has; bounds a typo such as --count 80000


@dataclasses.dataclass(frozen=True)
class NodeGpu:
    """One GPU of a node: its NVML index, PCI IDs, product name and MIG geometry (None when
    kubectl gpu knows none for it)."""

    index: int
    pci_device_id: int
    name: str
    model: GpuModel | None
    mig_capable: bool = True
    subsystem_id: int | None = None

    @property
    def pci_id(self) -> str:
        """The PCI device+vendor ID as a device-filter writes it."""
        return f"0x{self.pci_device_id:08X}"


@dataclasses.dataclass(frozen=True)
class Target:
    """What a config is checked against: a node's GPUs, named as the user named them."""

    name: str
    gpus: tuple[NodeGpu, ...]
    node: str | None = None


@dataclasses.dataclass(frozen=True)
class Selection:
    """The specs (position in the config, spec) that select one GPU, in file order."""

    gpu: NodeGpu
    specs: tuple[tuple[int, MigDeviceSpec], ...]

    @property
    def covered(self) -> bool:
        """True when at least one spec selects the GPU."""
        return bool(self.specs)


def select(specs: Sequence[MigDeviceSpec], gpus: Sequence[NodeGpu]) -> tuple[Selection, ...]:
    """For each GPU, the specs that select it, as mig-parted walks them."""
    return tuple(
        Selection(
            gpu,
            tuple(
                (position, spec)
                for position, spec in enumerate(specs)
                if spec.selects(gpu.index, gpu.pci_device_id, gpu.subsystem_id)
            ),
        )
        for gpu in gpus
    )


def model_target(text: str, count: int = 1) -> Target:
    """A hypothetical node with `count` GPUs of the model `text` names (see `models.find`)."""
    if not 1 <= count <= MAX_GPUS:
        raise UsageError(f"a node has 1 to {MAX_GPUS} GPUs, not {count}")
    model, product = models.find(text)
    gpus = tuple(_known_gpu(index, model, product) for index in range(count))
    return Target(text, gpus)


def node_target(node: str, labels: Mapping[str, str]) -> Target:
    """A node's GPUs as GPU Feature Discovery labels them (`nvidia.com/gpu.product` and
    `nvidia.com/gpu.count`); raises GpuError when the labels do not say."""
    product = labels.get(keys.GPU_PRODUCT_LABEL, "")
    offline = "check the model offline instead: kubectl gpu mig validate --gpu MODEL --count N"
    if not product:
        raise GpuError(
            f"node {node} has no {keys.GPU_PRODUCT_LABEL} label, so its GPU model is unknown",
            hint=f"GPU Feature Discovery sets it; or {offline}",
        )
    base = product.removesuffix(_SHARED_SUFFIX)
    if _MIG_INFIX in base:
        raise GpuError(
            f"node {node} runs the device plugin with migStrategy single ({product}), so "
            f"{GPU_COUNT_LABEL} counts MIG devices, not GPUs",
            hint=offline,
        )
    found = models.lookup(base)
    if found is None:
        raise GpuError(
            f"node {node} has {product} GPUs, which is not a MIG-capable model kubectl gpu knows",
            hint="kubectl gpu mig profiles lists the known models",
        )
    count = _count(node, labels.get(GPU_COUNT_LABEL, ""))
    gpus = tuple(_known_gpu(index, *found) for index in range(count))
    return Target(node, gpus, node=node)


def state_target(state: MigState, node: str = "") -> Target:
    """The GPUs of a node's live MIG state, with the geometry of each known model."""
    gpus = []
    for gpu in state.gpus:
        found = models.by_pci_id(gpu.pci_device_id) or models.lookup(gpu.model)
        model = found[0] if found and gpu.mig_capable else None
        gpus.append(NodeGpu(gpu.index, gpu.pci_device_id, gpu.model, model, gpu.mig_capable))
    return Target(node or "node", tuple(gpus), node=node or None)


def _known_gpu(index: int, model: GpuModel, product: Product) -> NodeGpu:
    return NodeGpu(index, product.pci_device_id, product.name or model.name, model)


def _count(node: str, text: str) -> int:
    count = numbers.whole(text)
    if count is not None and 1 <= count <= MAX_GPUS:
        return count
    raise GpuError(
        f"node {node} has no usable {GPU_COUNT_LABEL} label ({text or 'missing'})",
        hint="GPU Feature Discovery sets it; or check the model offline with --gpu MODEL --count N",
    )
