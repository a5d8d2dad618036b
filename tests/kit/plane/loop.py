"""The simulated control plane's one worker: a work queue fed by the store's change feed.

Owns `ControlLoop`: controllers register, each store change is offered to every controller,
which names the keys it wants reconciled; one worker thread runs those reconciles in order
(deduplicated, so a burst of changes costs one pass), runs delayed work when it falls due
(crash-loop back-offs, GFD's relabel interval), keeps the exceptions controllers raise, and
answers "are we quiet?" for `settle()`. Must not know what any controller does, and must not
poll: the worker sleeps on a condition until work arrives or a timer falls due.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from tests.kit.kube import ApiError
from tests.kit.plane.store import ApiStore, ObjectKey

Obj = dict[str, Any]


@dataclass(frozen=True)
class Change:
    """One committed write as controllers see it."""

    type: str  # ADDED, MODIFIED or DELETED
    resource: str  # plural, e.g. "pods", "nodes", "clusterpolicies"
    namespace: str
    name: str
    obj: Obj


class Controller(Protocol):
    """A simulated controller: maps changes to keys, reconciles one key at a time."""

    name: str

    def keys_for(self, change: Change) -> Iterable[Hashable]:
        """Keys to reconcile after `change`; runs on the writer's thread, so keep it cheap."""
        ...

    def reconcile(self, key: Hashable) -> None:
        """Bring the world in line for `key`; runs on the loop's worker thread only."""
        ...


class ControlLoop:
    """One worker thread running every controller's reconciles, in arrival order."""

    def __init__(self, store: ApiStore) -> None:
        self.store = store
        self.errors: list[BaseException] = []
        self._controllers: dict[str, Controller] = {}
        self._cond = threading.Condition()
        self._queue: dict[tuple[str, Hashable], None] = {}  # insertion-ordered set
        self._timers: list[tuple[float, int, str, Hashable]] = []
        self._ticket = itertools.count()
        self._busy = False
        self._stopping = False
        self._seen_rv = store.resource_version
        self._thread: threading.Thread | None = None
        self._unsubscribe: Callable[[], None] | None = None

    def add(self, controller: Controller) -> None:
        self._controllers[controller.name] = controller

    def start(self) -> None:
        self._unsubscribe = self.store.subscribe(self._on_change)
        self._thread = threading.Thread(target=self._work, name="sim-cluster-loop", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    # ---- feeding the queue ---------------------------------------------------------------

    def enqueue(self, controller: str, key: Hashable) -> None:
        with self._cond:
            self._queue[(controller, key)] = None
            self._cond.notify_all()

    def after(self, delay: float, controller: str, key: Hashable) -> None:
        """Reconcile `key` once `delay` seconds have passed (a back-off or an interval)."""
        with self._cond:
            due = time.monotonic() + delay
            heapq.heappush(self._timers, (due, next(self._ticket), controller, key))
            self._cond.notify_all()

    def _on_change(self, event_type: str, key: ObjectKey, obj: Obj) -> None:
        change = Change(event_type, key.resource, key.namespace, key.name, obj)
        wanted: list[tuple[str, Hashable]] = []
        for controller in list(self._controllers.values()):
            try:
                wanted += [(controller.name, k) for k in controller.keys_for(change)]
            except Exception as exc:  # a controller bug must fail the test, not the writer
                self.errors.append(exc)
        rv = int(obj.get("metadata", {}).get("resourceVersion") or 0)
        with self._cond:
            self._seen_rv = max(self._seen_rv, rv)
            for item in wanted:
                self._queue[item] = None
            self._cond.notify_all()

    # ---- the worker ------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            with self._cond:
                item = self._next_item()
                if item is None:
                    return
                self._busy = True
            try:
                self._run(*item)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _next_item(self) -> tuple[str, Hashable] | None:
        """Wait (holding the condition) for the next due item; None when stopping."""
        while not self._stopping:
            now = time.monotonic()
            while self._timers and self._timers[0][0] <= now:
                _, _, controller, key = heapq.heappop(self._timers)
                self._queue[(controller, key)] = None
            if self._queue:
                item = next(iter(self._queue))
                del self._queue[item]
                return item
            timeout = self._timers[0][0] - now if self._timers else None
            self._cond.wait(timeout)
        return None

    def _run(self, controller_name: str, key: Hashable) -> None:
        controller = self._controllers[controller_name]
        try:
            controller.reconcile(key)
        except ApiError as exc:
            if exc.code == 409:  # someone wrote in between: look again
                self.enqueue(controller_name, key)
            elif "storage is (re)initializing" in str(exc):
                # a real server's answer for a CRD created a moment ago: its watch cache is
                # not ready yet (as client-go's work queues do: try again shortly)
                self.after(0.2, controller_name, key)
            elif exc.code != 404:  # the object went away meanwhile: nothing to do
                self.errors.append(exc)
        except Exception as exc:
            self.errors.append(exc)

    # ---- quiescence ------------------------------------------------------------------------

    def _quiet(self) -> bool:
        return not self._queue and not self._busy and self._seen_rv >= self.store.resource_version

    def settle(self, timeout: float) -> bool:
        """Wait until every change has been seen and no work is due (timers may be pending)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self._quiet():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                # A write from outside the loop (kubectl, a test) commits before its change
                # reaches `_on_change`; that callback's notify wakes this wait.
                self._cond.wait(remaining)
            return True
