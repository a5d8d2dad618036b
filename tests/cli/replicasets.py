"""A test's GPU pod owned by a real ReplicaSet, and budgets the real disruption controller has
counted, for the drain tests on the real control plane (not a test module).

The ReplicaSet is made after its pod and adopts it, so the pod keeps the name the test gave it
and the controller makes none of its own; an evicted pod is then replaced by the controller, as
in any cluster.
"""

from __future__ import annotations

from typing import Any

from tests.kit.cluster import SimCluster
from tests.kit.plane.plane import wait_for

Obj = dict[str, Any]


def adopt(cluster: SimCluster, pod: Obj, owner: str) -> None:
    """ReplicaSet `owner` (one replica, selecting `pod`'s labels) takes the running `pod`."""
    meta = pod["metadata"]
    labels, namespace = meta["labels"], meta.get("namespace", "default")
    cluster.client.create({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": owner, "namespace": namespace},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": pod["spec"]}},
    })  # fmt: skip

    def controller() -> str:
        refs = cluster.client.get("pods", meta["name"], namespace)["metadata"].get(
            "ownerReferences"
        )
        return next((str(r["name"]) for r in refs or [] if r.get("controller")), "")

    wait_for(f"ReplicaSet {owner} to adopt {meta['name']}", lambda: controller() == owner)


def budget(cluster: SimCluster, spec: Obj, name: str = "train-pdb") -> None:
    """PodDisruptionBudget `name` in default, once the disruption controller has counted it
    (until then an eviction is refused as "still being processed")."""
    cluster.client.create({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec,
    })  # fmt: skip

    def counted() -> bool:
        found = cluster.client.get("poddisruptionbudgets", name, "default")
        status = found.get("status") or {}
        return bool(status.get("observedGeneration") == found["metadata"].get("generation"))

    wait_for(f"the disruption controller to count {name}", counted)


def replacements(cluster: SimCluster, owner: str, namespace: str = "default") -> list[Obj]:
    """The pods of `namespace`, each checked to be one `owner` made."""
    pods = cluster.client.list("pods", namespace)
    assert all(p["metadata"].get("generateName") == f"{owner}-" for p in pods), pods
    return pods
