"""Progress of a long wait, on stderr through logging: one line per node when its state
changes, and on a terminal a reminder every `heartbeat` seconds while nothing changes, so a
ten-minute MIG change never looks like a hung command; and for a rollout in batches, where it
stands (batch n of m, nodes done of all) and what the batch waits for, so that 5,000 nodes in
50 batches read as more than node names going by. Owns nothing else."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from kubectl_gpu.workflows.waiting import Timing

log = logging.getLogger(__name__)


@dataclasses.dataclass
class Progress:
    """What was last said about each node, and when (seconds into the wait)."""

    heartbeat: float | None = None
    _said: dict[str, tuple[str, float]] = dataclasses.field(default_factory=dict)

    def tell(self, node: str, state: str, elapsed: float) -> None:
        """Say `state` for `node` if it changed, or if the last word is `heartbeat` old."""
        last = self._said.get(node)
        stale = last is not None and self.heartbeat and elapsed - last[1] >= self.heartbeat
        if last is None or last[0] != state or stale:
            self._said[node] = (state, elapsed)
            log.info("node %s: %s (%.0fs)", node, state, elapsed)

    def last(self, node: str) -> str:
        """The last state seen for `node` ("" before the first look)."""
        found = self._said.get(node)
        return found[0] if found else ""


NAMED = 3  # nodes named in a batch's line; the others are counted


@dataclasses.dataclass
class Batches:
    """A rollout of `nodes` nodes, at most `size` at a time: which batch runs, how many nodes
    are through, and what the batch waits for (said when its wait starts, then each
    heartbeat while it lasts). Seconds count from when the rollout was made."""

    nodes: int
    size: int
    timing: Timing
    number: int = 0
    done: int = 0
    _waits: str = ""
    _said_at: float = 0.0
    _start: float = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self._start = self.timing.clock()

    @property
    def count(self) -> int:
        return max(1, -(-self.nodes // max(1, self.size)))

    def begin(self, doing: str, nodes: Sequence[str]) -> None:
        """A batch starts `doing` on `nodes`."""
        self.number, self._waits = self.number + 1, ""
        log.info(
            "batch %d of %d: %s on %s (%d of %d nodes done)",
            self.number, self.count, doing, named(nodes), self.done, self.nodes,
        )  # fmt: skip

    def waiting(self, what: str, nodes: Sequence[str]) -> None:
        """The batch waits for `what` on `nodes` (those not through yet)."""
        elapsed, heartbeat = self._elapsed(), self.timing.heartbeat
        again = heartbeat and elapsed - self._said_at >= heartbeat
        if not nodes or (self._waits == what and not again):
            return
        self._waits, self._said_at = what, elapsed
        log.info(
            "batch %d of %d: waiting for %s on %s (%.0fs)",
            self.number, self.count, what, named(nodes), elapsed,
        )  # fmt: skip

    def end(self, through: int, number: int | None = None) -> None:
        """Batch `number` (the current one by default) ended with `through` of its nodes
        done (the others failed); a later batch may have begun meanwhile."""
        self.done += through
        log.info(
            "batch %d of %d ended: %d of %d nodes done (%.0fs)",
            number or self.number, self.count, self.done, self.nodes, self._elapsed(),
        )  # fmt: skip

    def _elapsed(self) -> float:
        return self.timing.clock() - self._start


def named(nodes: Sequence[str]) -> str:
    """`1 node (a)`, `5 nodes (a, b, c and 2 more)`."""
    shown = ", ".join(nodes[:NAMED])
    more = f" and {len(nodes) - NAMED} more" if len(nodes) > NAMED else ""
    return f"{len(nodes)} node{'' if len(nodes) == 1 else 's'} ({shown}{more})"
