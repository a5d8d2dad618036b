"""What wakes the agent: watches on its own Node and on our MIG ConfigMap, a bounded resync,
and jittered back-off, so that an agent at rest sends the API server nothing.

Owns `Backoff` (exponential, jittered over its upper half: 5,000 agents that fail together, say
when the API server restarts, come back spread out instead of in one wave), `Watch` (one thread per
watched object: a LIST by field selector for a baseline, then a WATCH from its resourceVersion,
reopened from the last version seen, bookmarks included, when the server ends it, and listed
again only after 410 Gone) and `Wakeups` (the loop's wait: until a watch saw a change that a
pass reads, the resync is due, or the loop's own deadline passes). A Node changes often for
reasons of no concern here (the kubelet's status heartbeats, GFD's timestamp label): only its
labels and annotations of ours and NVIDIA's wake the agent; of the ConfigMap, its data.
Must not run passes (agent/passes.py does) nor read anything but the two watched objects.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from kubectl_gpu import cluster, errors, keys

log = logging.getLogger(__name__)
Json = dict[str, Any]

RESYNC = 12 * 3600.0  # as kube-controller-manager's --min-resync-period: a safety net only
MAX_BACKOFF = 60.0  # a watch or a pass retried at most a minute after the server is back
_SYNC_WAIT = 10.0  # at start, how long the first pass waits for the watches' baselines


class Backoff:
    """Delays after consecutive failures: `base` × 2ⁿ up to `cap`, each drawn uniformly
    between half of that and all of it (never zero: a fleet must not retry in lockstep)."""

    def __init__(self, base: float, cap: float = MAX_BACKOFF, rng: random.Random | None = None):
        self.base, self.cap = max(base, 0.05), cap
        self.failures = 0
        self._rng = rng or random.Random()

    def next(self) -> float:
        ceiling = min(self.cap, self.base * 2**self.failures)
        self.failures = min(self.failures + 1, 32)
        return self._rng.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        self.failures = 0


def jittered(seconds: float, rng: random.Random | None = None) -> float:
    """`seconds` ± 10 %: periodic work of many agents started together drifts apart."""
    return seconds * (rng or random).uniform(0.9, 1.1)


@dataclasses.dataclass(frozen=True)
class Target:
    """One watched object, and the part of it a pass reads."""

    url: str  # the collection
    name: str
    interest: Callable[[Json], Any]

    @property
    def selector(self) -> str:
        return f"metadata.name={self.name}"


def _node_interest(node: Json) -> Any:
    """The Node's keys a pass reads: ours and NVIDIA's (the operator's MIG and deploy labels),
    not GFD's timestamp, which changes every minute on every GPU node."""
    meta = node.get("metadata") or {}
    return tuple(
        {
            k: v
            for k, v in (meta.get(part) or {}).items()
            if k.startswith((keys.PREFIX, keys.NVIDIA_PREFIX)) and k != keys.GFD_TIMESTAMP_LABEL
        }
        for part in ("labels", "annotations")
    )


def _configmap_interest(configmap: Json) -> Any:
    return (configmap.get("data") or {}, configmap.get("binaryData") or {})


def targets(node: str, namespace: str) -> tuple[Target, ...]:
    """What a reconcile pass reads that others change: the Node (the desired-config label,
    the force annotation) and our MIG ConfigMap (the config's content)."""
    return (
        Target(cluster.path("nodes"), node, _node_interest),
        Target(cluster.path("configmaps", namespace=namespace), keys.MIG_CONFIGMAP,
               _configmap_interest),
    )  # fmt: skip


class Watch:
    """One object watched in a thread; `wake` is set when the part of it we read changes."""

    def __init__(
        self,
        api: cluster.Api,
        target: Target,
        wake: threading.Event,
        *,
        seconds: float,
        retry: float,
    ) -> None:
        self.api, self.target, self.wake = api, target, wake
        self.seconds = max(1, int(seconds))
        self.synced = threading.Event()  # the baseline is known
        self.stopping = threading.Event()
        self._backoff = Backoff(retry)
        self._seen: Any = None  # the interest of the object as last seen; None: absent
        self._version = ""
        self._thread = threading.Thread(target=self._run, name=f"watch-{target.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                if not self._version:
                    self._list()
                self._follow()
                self._backoff.reset()
                continue  # the server ended the watch on time: reopen it from where it was
            except errors.GpuError as e:
                if self.stopping.is_set():
                    return
                delay = self._backoff.next()
                log.warning(
                    "watching %s %s: %s; again in %.1fs",
                    self.target.url, self.target.name, errors.printable(e.message), delay,
                )  # fmt: skip
            except Exception as e:  # noqa: BLE001 - a bug ends this watch's attempt, not the agent
                delay = self._backoff.next()
                log.error("watching %s: internal error: %s: %s", self.target.name,
                          type(e).__name__, errors.printable(e))  # fmt: skip
            self.stopping.wait(delay)

    def _list(self) -> None:
        """The object now and the version to watch from (two requests per start, not one per
        pass); a change since the last look wakes the agent."""
        page = self.api.request(
            "GET", self.target.url, query={"fieldSelector": self.target.selector}
        )
        items = page.get("items") or []
        self._see(items[0] if items else None)
        self._version = str((page.get("metadata") or {}).get("resourceVersion") or "")
        self.synced.set()

    def _follow(self) -> None:
        events = self.api.watch(
            self.target.url,
            field_selector=self.target.selector,
            resource_version=self._version,
            seconds=self.seconds,
        )
        for event in events:
            if self.stopping.is_set():
                return
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                self._version = ""  # 410 Gone and kin: list again, then watch from there
                if obj.get("code") != 410:
                    raise errors.ClusterError(f"the watch ended: {obj.get('message', obj)}")
                return
            version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            self._version = version or self._version
            if kind in ("ADDED", "MODIFIED"):
                self._see(obj)
            elif kind == "DELETED":
                self._see(None)

    def _see(self, obj: Json | None) -> None:
        interest = None if obj is None else self.target.interest(obj)
        first = not self.synced.is_set()
        if not first and interest != self._seen:
            log.debug("%s %s changed: waking up", self.target.url, self.target.name)
            self.wake.set()
        self._seen = interest


class Wakeups:
    """The agent's reasons to run a pass: a watched change, or the resync."""

    def __init__(
        self,
        api: cluster.Api,
        node: str,
        namespace: str,
        *,
        resync: float = RESYNC,
        retry: float = 1.0,
    ) -> None:
        self.resync = resync
        self.changed = threading.Event()
        # A watch lasts about as long as a resync period: at rest, each agent sends its few
        # requests once per period, and none in between.
        self.watches = [
            Watch(api, t, self.changed, seconds=jittered(resync), retry=retry)
            for t in targets(node, namespace)
        ]
        self._resync_at = float("inf")

    def start(self) -> None:
        """Start the watches and wait (a bounded time) for their baselines, so that a change
        made after the first pass read the objects is never taken for the baseline."""
        for watch in self.watches:
            watch.start()
        deadline = time.monotonic() + _SYNC_WAIT
        for watch in self.watches:
            watch.synced.wait(max(0.0, deadline - time.monotonic()))
        self.changed.clear()

    def passed(self) -> None:
        """A pass began: what woke it is consumed and the next resync counts from now."""
        self.changed.clear()
        self._resync_at = time.monotonic() + jittered(self.resync)

    def wait(self, seconds: float) -> bool:
        """Wait up to `seconds`; True when a pass is due (a watched change, or the resync)."""
        left = min(seconds, self._resync_at - time.monotonic())
        if left > 0 and self.changed.wait(left):
            return True
        return self.changed.is_set() or time.monotonic() >= self._resync_at

    def stop(self) -> None:
        for watch in self.watches:
            watch.stop()
