"""The agent records on its Node since when a MIG change has been pending (its own, or the GPU
Operator's MIG manager's), so that `mig status` and `doctor` can tell a stuck one, and forgets
it once the change ends."""

from __future__ import annotations

import datetime as dt
from typing import Any

from kubectl_gpu import keys
from kubectl_gpu.mig import stuck
from tests.agent.fixtures import Agent, ask, notes, store_config
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import layouts

SINCE = keys.MIG_PENDING_SINCE_ANNOTATION


def test_our_change_is_pending_since_it_began_and_not_after(
    sim_cluster: MakeSimCluster, agent: Agent
) -> None:
    cluster = sim_cluster(["gpu-1=H100-SXM5-80GB:1"], layouts.helm(env={"MIG_STRATEGY": "mixed"}))
    seen: list[tuple[str | None, str | None]] = []

    def watch(kind: str, key: Any, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if obj.get("kind") == "Node" and meta.get("name") == "gpu-1":
            state = (meta.get("labels") or {}).get(keys.MIG_STATE_LABEL)
            seen.append((state, (meta.get("annotations") or {}).get(SINCE)))

    cluster.store.subscribe(watch)
    store_config(cluster, "balanced", {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1})
    ask(cluster, "gpu-1", "balanced")
    before = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)

    agent(cluster, "gpu-1")

    pending = {since for state, since in seen if state == "pending"}
    assert len(pending) == 1 and None not in pending  # written once, with the first pending
    began = stuck.pending_since({SINCE: pending.pop() or ""})
    assert began is not None and began >= before
    assert seen[-1] == ("success", None)
    assert SINCE not in notes(cluster, "gpu-1")


def test_the_operators_pending_change_is_timed_too(
    sim_cluster: MakeSimCluster, agent: Agent
) -> None:
    cluster = sim_cluster(["gpu-1=H100-SXM5-80GB:1"], "gpu-operator")
    pending = {"metadata": {"labels": {keys.MIG_CONFIG_STATE_LABEL: "pending"}}}
    cluster.client.patch("nodes", "gpu-1", pending)

    agent(cluster, "gpu-1")
    first = notes(cluster, "gpu-1")[SINCE]
    agent(cluster, "gpu-1")
    assert notes(cluster, "gpu-1")[SINCE] == first  # kept, not renewed each pass

    done = {"metadata": {"labels": {keys.MIG_CONFIG_STATE_LABEL: "success"}}}
    cluster.client.patch("nodes", "gpu-1", done)
    agent(cluster, "gpu-1")
    assert SINCE not in notes(cluster, "gpu-1")
