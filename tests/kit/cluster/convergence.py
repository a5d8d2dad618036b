"""Whether a simulated cluster has settled: the node side and Kubernetes' own controllers.

Owns `settle` (the look `SimCluster.settle` repeats until nothing is in flight) and
`unconverged` (what the real controllers have not caught up with yet: namespaces being
deleted, DaemonSets' pods not placed, pods not bound or started). Must not change anything it
looks at, or decide what a test waits for beyond "nothing left in flight".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tests.kit.plane.loop import ControlLoop

Obj = dict[str, Any]
LEAST_WAIT = 60.0  # seconds: real controllers on a loaded machine (30 s timed out in CI runs)


def settle(
    loop: ControlLoop, store: Any, busy: Callable[[], str | None], timeout: float
) -> tuple[bool, str | None]:
    """Whether the cluster became quiet within `timeout` (at least `LEAST_WAIT` on a real
    server), and what it last waited for (None: nothing). Quiet: the control loop has acted on
    every change, the real controllers have converged (`unconverged`), `busy` (the node's
    programs) names nothing, every watched object's last revision has arrived, twice in a
    row."""
    deadline = time.monotonic() + max(timeout, LEAST_WAIT)
    calm = 0
    waited: str | None = None
    while time.monotonic() < deadline:
        left = deadline - time.monotonic()
        waited = "the node side" if not loop.settle(left) else unconverged(store)
        if waited is None:
            waited = busy()
        if waited is None and not store.synced():
            waited = "watch events still on their way"
        calm = calm + 1 if waited is None and loop.settle(0) else 0
        if calm >= 2:  # twice in a row: nothing was in flight between the two looks
            return True, None
        time.sleep(0.1)
    return False, waited


def unconverged(store: Any) -> str | None:
    """What the real controllers have not caught up with yet (namespaces deleted, DaemonSets'
    pods placed, pods bound and started or reported unschedulable), or None."""
    for namespace in store.list("namespaces"):
        if namespace["metadata"].get("deletionTimestamp"):
            return f"namespace {namespace['metadata']['name']}: being deleted"
    for ds in store.list("daemonsets"):
        status, meta = ds.get("status") or {}, ds["metadata"]
        where = f"daemonset {meta['namespace']}/{meta['name']}"
        if (status.get("observedGeneration") or 0) < meta.get("generation", 0):
            return f"{where}: not observed yet"
        placed, desired = (
            status.get(k, 0) for k in ("currentNumberScheduled", "desiredNumberScheduled")
        )
        if placed != desired:
            return f"{where}: {placed} of {desired} pods placed"
    return next(filter(None, map(_pod_unsettled, store.list("pods"))), None)


def _pod_unsettled(pod: Obj) -> str | None:
    meta, status = pod["metadata"], pod.get("status") or {}
    where = f"pod {meta['namespace']}/{meta['name']}"
    if meta.get("deletionTimestamp"):
        return f"{where}: being deleted"
    if pod["spec"].get("nodeName"):  # started: Running, or Pending with its containers told of
        started = status.get("phase") != "Pending" or status.get("containerStatuses")
        return None if started else f"{where}: bound, not started"
    unschedulable = any(
        c.get("type") == "PodScheduled" and c.get("status") == "False"
        for c in status.get("conditions") or []
    )
    return None if unschedulable else f"{where}: not scheduled yet"
