"""Sample nodes: tests/data/checkpoints/ is generated from these (see its README.md).
Must not be read by anything but the tests that regenerate or compare those files."""

from __future__ import annotations

from pathlib import Path

from tests.kit.node.kubelet.checkpoint import (
    CheckpointFormat,
    checkpoint_document,
    checkpoint_entries,
    checkpoint_text,
    registered_devices,
)
from tests.kit.node.kubelet.pods import Allocatable, Container, Devices, Pod

NodeScenario = tuple[tuple[Pod, ...], Allocatable]


def time_sliced_node() -> NodeScenario:
    """One A10G on NUMA node 0 shared by time-slicing, replicas 4; a notebook holds two replicas."""
    gpu = "GPU-4f2c7e1a-9b3d-4c8e-a1f0-6d5b2e8c9a17"
    replica = [f"{gpu}::{n}" for n in range(4)]

    def one(name: str, uid: str, ids: tuple[str, ...]) -> Pod:
        devices = (Devices("nvidia.com/gpu", ids, numa_nodes=(0,)),)
        return Pod(name, "ml", (Container("main", devices),), uid=uid)

    pods = (
        one("llm-a-7d9f8b6c5-x2k4q", "0b8e3c52-6f1d-4a7e-9c24-8d5f1e3a7b90", (replica[0],)),
        one("llm-b-7d9f8b6c5-m7p2z", "5c1a9e47-2b8d-4f63-a0e5-3e9b7c2d1f48", (replica[1],)),
        one("notebook-0", "a7d4f2e1-8c3b-4e59-b6a0-1f2e9d8c7b65", (replica[2], replica[3])),
    )
    allocatable = Allocatable(devices=(Devices("nvidia.com/gpu", tuple(replica), (0,)),))
    return pods, allocatable


def pre_1_20_node() -> NodeScenario:
    """A Kubernetes 1.19 node with two Tesla T4s, each held by one training pod."""
    gpus = ("GPU-8a1d5c3e-2f7b-4d9a-b6e4-0c3f9a2d7e15", "GPU-e3b9f1a7-6c2d-4e8b-9a5f-7d1c4b8e2a63")

    def one(name: str, uid: str, gpu: str) -> Pod:
        devices = (Devices("nvidia.com/gpu", (gpu,)),)
        return Pod(name, "default", (Container("trainer", devices),), uid=uid)

    pods = (
        one("resnet-train-0", "6e2f8a14-3b7c-11eb-9d5e-0242ac110002", gpus[0]),
        one("resnet-train-1", "6e31c9a2-3b7c-11eb-9d5e-0242ac110002", gpus[1]),
    )
    return pods, Allocatable(devices=(Devices("nvidia.com/gpu", gpus),))


SAMPLES: dict[str, tuple[NodeScenario, CheckpointFormat]] = {
    "time-sliced-4x.json": (time_sliced_node(), "current"),
    "pre-1.20-2gpu.json": (pre_1_20_node(), "pre-1.20"),
}


def sample_text(name: str) -> str:
    """The checkpoint text of one sample, byte for byte as written to tests/data/checkpoints/."""
    (pods, allocatable), fmt = SAMPLES[name]
    entries = checkpoint_entries(pods)
    return checkpoint_text(checkpoint_document(entries, registered_devices(allocatable), fmt))


def write_samples(folder: Path) -> None:
    """Regenerate the sample checkpoint files in ``folder``."""
    for name in SAMPLES:
        (folder / name).write_text(sample_text(name), encoding="utf-8")
