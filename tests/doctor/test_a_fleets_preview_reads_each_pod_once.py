"""The preview of a change across a fleet (`share`, `mig apply`) finds each node's pods in one
pass over the pods: it went through every pod of the cluster once per changed node, so 10,000
nodes with 80,000 pods were 800 million looks, beyond this suite's 30 s per test (which is what
fails if it regresses; timings are the benchmarks'). Each node still lists exactly the pods of
its own that the change hits: running pods that ask for the shrinking resource, not ended ones
nor those that ask for none."""

from __future__ import annotations

import dataclasses

from kubectl_gpu.doctor import preview
from tests.doctor.builders import node, pod

NODES = 10_000
GPU = "nvidia.com/gpu"


def test_ten_thousand_nodes_each_list_their_own_hit_pods() -> None:
    template = pod({GPU: "1"}, phase="Running")
    idle = pod({}, phase="Running")  # asks for no GPU
    nodes, pods = [], []
    for n in range(NODES):
        name = f"gpu-{n}"
        nodes.append(node(name, 8))
        pods += [dataclasses.replace(template, name=f"train-{n}-{i}", node=name) for i in range(6)]
        pods.append(dataclasses.replace(idle, name=f"idle-{n}", node=name))
        pods.append(dataclasses.replace(template, name=f"done-{n}", node=name, phase="Succeeded"))
    changes = [
        preview.Change(f"gpu-{n}", {GPU: 4}, resources=frozenset({GPU})) for n in range(NODES)
    ]

    seen = preview.make(changes, nodes, pods)

    assert len(seen.nodes) == NODES
    for n, shown in enumerate(seen.nodes):
        assert shown.node == f"gpu-{n}"
        assert shown.capacity == ((GPU, 8, 4),)
        assert [h.pod for h in shown.hit] == [f"train-{n}-{i}" for i in range(6)]
        assert {h.why for h in shown.hit} == {f"uses {GPU}, which shrinks (8 → 4)"}
