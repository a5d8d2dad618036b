"""The resources and device IDs NVIDIA's device plugin v0.19.3 registers on one node, config
after config, as the kubelet stand-in and the Node's allocatable show them.

One A100×4 node with MIG devices on two GPUs; the config-manager switches the plugin through
MIG strategies and time-slicing configs by the node's `nvidia.com/device-plugin.config` label (a
SIGHUP to NVIDIA's running process). The names and IDs the product reads (`share`, `map`,
`mig validate`) are these: whole GPUs by UUID, MIG devices by MIG UUID under
`nvidia.com/mig-<profile>`, replicas `<UUID>::<n>`, and `<name>.shared` under renameByDefault.
"""

from __future__ import annotations

import pytest

from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(300)]

LABEL = "nvidia.com/device-plugin.config"
MIG = {0: ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"], 1: ["7g.80gb"]}


def config(strategy: str, sharing: str = "") -> str:
    return f"version: v1\nflags:\n  migStrategy: {strategy}\n{sharing}"


def sliced(name: str, replicas: int, rename: bool = False) -> str:
    flag = "    renameByDefault: true\n" if rename else ""
    return (
        f"sharing:\n  timeSlicing:\n{flag}    resources:\n"
        f"    - name: {name}\n      replicas: {replicas}\n"
    )


CONFIGS = {
    "none": config("none"),
    "mixed": config("mixed"),
    "mixed-shared": config("mixed", sliced("nvidia.com/mig-1g.10gb", 2)),
    "none-sliced": config("none", sliced("nvidia.com/gpu", 3)),
    "mixed-renamed": config("mixed", sliced("nvidia.com/gpu", 2, rename=True)),
}


def expected(cluster: SimCluster) -> dict[str, dict[str, list[str]]]:
    """Per config: resource -> device IDs, from the node's GPUs as NVML enumerates them."""
    views = cluster.nodes["gpu-a"].gpu_views()
    whole = [g.uuid for g in views]
    plain = [g.uuid for g in views if not g.mig_enabled]
    migs: dict[str, list[str]] = {}
    for gpu in views:
        for device in gpu.mig_devices:
            migs.setdefault(f"nvidia.com/mig-{device.profile}", []).append(device.uuid)
    small = migs["nvidia.com/mig-1g.10gb"]
    return {
        "none": {"nvidia.com/gpu": whole},
        "mixed": {"nvidia.com/gpu": plain, **migs},
        "mixed-shared": {
            "nvidia.com/gpu": plain,
            **migs,
            "nvidia.com/mig-1g.10gb": [f"{u}::{r}" for u in small for r in range(2)],
        },
        "none-sliced": {"nvidia.com/gpu": [f"{u}::{r}" for u in whole for r in range(3)]},
        "mixed-renamed": {
            "nvidia.com/gpu.shared": [f"{u}::{r}" for u in plain for r in range(2)],
            **migs,
        },
    }


def registered(cluster: SimCluster) -> dict[str, list[str]]:
    return {name: sorted(ids) for name, ids in cluster.advertised("gpu-a").items()}


def shown(cluster: SimCluster) -> dict[str, str]:
    allocatable = cluster.store.get("nodes", "gpu-a")["status"].get("allocatable") or {}
    return {k: v for k, v in allocatable.items() if k.startswith("nvidia.com/") and v != "0"}


def test_nvidia_plugin_names_resources_and_ids_per_config(sim_cluster: MakeSimCluster) -> None:
    node = NodeSpec("gpu-a", "A100-SXM4-80GB", 4, labels={LABEL: "none"}, mig=MIG)
    cluster = sim_cluster([node], layout="helm", configs=CONFIGS, default_config="none")
    wanted = expected(cluster)
    differences = {}
    for key in CONFIGS:
        cluster.store.patch("nodes", "gpu-a", {"metadata": {"labels": {LABEL: key}}})
        cluster.settle(30)
        want = {name: sorted(ids) for name, ids in wanted[key].items()}
        counts = {name: str(len(ids)) for name, ids in want.items()}
        got = (registered(cluster), shown(cluster))
        if got != (want, counts):
            differences[key] = {"wanted": (want, counts), "nvidia": got}
    assert not differences, differences
