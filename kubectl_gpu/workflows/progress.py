"""Progress of a long wait, on stderr through logging: one line per node when its state
changes, and on a terminal a reminder every `heartbeat` seconds while nothing changes, so a
ten-minute MIG change never looks like a hung command. Owns nothing else."""

from __future__ import annotations

import dataclasses
import logging

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
