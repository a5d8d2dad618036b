"""What the Python GFD stand-in (tests/fakes/cluster/gfd.py) writes against what NVIDIA's own GFD
v0.19.3 writes, for every layout, sharing and MIG state the tests use; each difference is named
here (and in docs/simulated-node.md), so a new one fails.

One cluster per layout that runs GFD: the Helm chart (no MIG strategy of its own; configs set
`flags.migStrategy`) and the GPU Operator (MIG strategy single from its ClusterPolicy). Each node
is one state, chosen by its `nvidia.com/device-plugin.config` label and its MIG devices.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import eventually
from tests.fakes.cluster import NodeSpec, gfd, netns, pluginconfig
from tests.fakes.cluster.cluster import SimCluster
from tests.fakes.cluster.fixture import MakeSimCluster
from tests.fakes.node import sandbox

pytestmark = [
    pytest.mark.timeout(400),
    pytest.mark.skipif(sandbox.unavailable() is not None, reason=str(sandbox.unavailable())),
    pytest.mark.skipif(netns.unavailable() is not None, reason=str(netns.unavailable())),
]

CONFIG = "nvidia.com/device-plugin.config"
TIMESTAMP = "nvidia.com/gfd.timestamp"
SHARED = "sharing:\n  {block}:\n    resources:\n    - name: {name}\n      replicas: 4\n"
MIXED = "version: v1\nflags:\n  migStrategy: mixed\n"
CONFIGS = {
    "default": "version: v1\n",
    "ts4": "version: v1\n" + SHARED.format(block="timeSlicing", name="nvidia.com/gpu"),
    "mps4": "version: v1\n" + SHARED.format(block="mps", name="nvidia.com/gpu"),
    "renamed": "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n"
    "    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n",
    # both blocks: MPS wins and timeSlicing is dropped (docs/upstream-facts.md P1.5)
    "both": "version: v1\n"
    + SHARED.format(block="mps", name="nvidia.com/gpu")
    + "  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 9\n",
    "mixed": MIXED,
    "mixed-ts": MIXED + SHARED.format(block="timeSlicing", name="nvidia.com/mig-1g.10gb"),
}
H100 = "H100-SXM5-80GB"


def spec(name: str, key: str, model: str = H100, count: int = 2, **mig: Any) -> NodeSpec:
    return NodeSpec(name, model, count, labels={CONFIG: key}, mig=mig.get("mig", {}))


def stand_in(cluster: SimCluster, node: str) -> dict[str, str]:
    """What gfd.py writes for the node's GPUs under the config the node's GFD pod reads."""
    state = next(s for s in cluster.gfd.on_node(node) if s.started)
    text, error = cluster.gfd.config_text(state, cluster.gfd.view(state))
    assert error is None, error
    config = pluginconfig.load(text, state.setup.env, gfd=True)
    return gfd.labels_for(cluster.nodes[node].gpu_views(), config)


def nvidias(cluster: SimCluster, node: str) -> dict[str, str]:
    """What NVIDIA's GFD wrote for the node, once NFD's master has put it on the Node."""
    namespace = cluster.layout.namespace if cluster.layout else ""

    def applied() -> dict[str, str]:
        try:
            found = cluster.store.get(
                "nodefeatures.nfd.k8s-sigs.io", f"nvidia-features-for-{node}", namespace
            )
        except Exception:  # noqa: BLE001 - not written yet
            return {}
        labels = dict((found.get("spec") or {}).get("labels") or {})
        on_node = cluster.store.get("nodes", node)["metadata"].get("labels") or {}
        done = labels and all(on_node.get(k) == v for k, v in labels.items() if k != TIMESTAMP)
        return labels if done else {}

    found: dict[str, str] = eventually(applied, 90)
    assert found, f"NVIDIA's GFD never labelled {node}"
    return found


def differences(ours: dict[str, str], theirs: dict[str, str]) -> dict[str, tuple[str, str]]:
    """label -> (the stand-in's value, NVIDIA's value); "" where one of them has none."""
    keys = (set(ours) | set(theirs)) - {TIMESTAMP}
    return {
        k: (ours.get(k, ""), theirs.get(k, ""))
        for k in sorted(keys)
        if ours.get(k) != theirs.get(k)
    }


HELM_NODES = [
    spec("plain", "default"),
    spec("ts4", "ts4"),
    spec("mps4", "mps4"),
    spec("renamed", "renamed"),
    spec("both", "both"),
    spec("mixed", "mixed", mig={0: ["3g.40gb", "2g.20gb", "1g.10gb"]}),
    spec("mixed-ts", "mixed-ts", mig={0: ["1g.10gb"] * 7, 1: ["1g.10gb"] * 7}),
    spec("l4", "default", "L4", 1),
]
# What NVIDIA's GFD writes that the stand-in does not (or otherwise), per node; see
# docs/simulated-node.md "What NVIDIA's GFD showed".
HELM_DIFFERENCES: dict[str, dict[str, tuple[str, str]]] = {
    "plain": {},
    "ts4": {},
    "mps4": {},
    "renamed": {},
    "both": {},
    # MIG on one of two GPUs: NVIDIA's full-GPU labels count both GPUs, the stand-in only the
    # one without MIG
    "mixed": {"nvidia.com/gpu.count": ("1", "2")},
    "mixed-ts": {},
    "l4": {},
}
OPERATOR_NODES = [
    NodeSpec("single", H100, 2, mig={0: ["1g.10gb"] * 7, 1: ["1g.10gb"] * 7}),
    NodeSpec("single-invalid", H100, 2, mig={0: ["3g.40gb", "1g.10gb"]}),
    NodeSpec("full", H100, 2),
]
OPERATOR_DIFFERENCES: dict[str, dict[str, tuple[str, str]]] = {
    "single": {},
    # an invalid single layout: NVIDIA's writes no gpu.sharing-strategy beside its MIG-INVALID
    # product, the stand-in kept "none"
    "single-invalid": {"nvidia.com/gpu.sharing-strategy": ("none", "")},
    "full": {},
}


@pytest.mark.parametrize(
    ("layout", "nodes", "expected"),
    [
        pytest.param("helm", HELM_NODES, HELM_DIFFERENCES, id="helm"),
        pytest.param("gpu-operator", OPERATOR_NODES, OPERATOR_DIFFERENCES, id="gpu-operator"),
    ],
)
def test_the_stand_in_differs_from_nvidias_gfd_only_where_named(
    sim_cluster: MakeSimCluster,
    layout: str,
    nodes: list[NodeSpec],
    expected: dict[str, dict[str, tuple[str, str]]],
) -> None:
    configs = CONFIGS if layout == "helm" else None
    cluster = sim_cluster(
        nodes, layout, configs=configs, default_config="default" if configs else None,
        nvidia_plugin=True, node_networks=True,
    )  # fmt: skip
    ours = {n.name: stand_in(cluster, n.name) for n in nodes}
    theirs = {n.name: nvidias(cluster, n.name) for n in nodes}
    assert {n: differences(ours[n], theirs[n]) for n in ours} == expected
    # and one more on every node: NVIDIA's GFD stamps each labelling (the chart and the
    # operator leave noTimestamp unset); the stand-in never did
    assert all(theirs[n][TIMESTAMP].isdigit() and TIMESTAMP not in ours[n] for n in ours)
