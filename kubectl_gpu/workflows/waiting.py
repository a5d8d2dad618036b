"""Time for workflows: a clock, a sleep and poll intervals, injected so tests never wait.

Owns `Timing` and `Deadline`. Every wait in a workflow polls through these and ends at a deadline;
nothing waits forever (docs/architecture.md, "The agent"). Polls start quick and back off (doubling
up to `poll`), like client-go's wait.Backoff: a change that lands at once is seen at once, and a
slow one costs the API server one request per `poll`. Must not know what is waited for.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable


@dataclasses.dataclass(frozen=True)
class Timing:
    """Where time comes from: real by default; tests pass a fake clock or shorter polls."""

    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    poll: float = 1.0  # the longest pause between two looks at the cluster
    first_poll: float = 0.05
    heartbeat: float | None = None  # repeat unchanged progress this often (on a terminal)

    @property
    def live(self) -> bool:
        """Real time: a wait may block on a watch. With an injected clock (tests) waits
        poll, so that time passes only when the test's sleep says so."""
        return self.clock is time.monotonic and self.sleep is time.sleep

    def deadline(self, seconds: float) -> Deadline:
        now = self.clock()
        return Deadline(self, now, now + seconds, min(self.first_poll, self.poll))


@dataclasses.dataclass
class Deadline:
    """A wait that started at `start` and must end by `end`."""

    timing: Timing
    start: float
    end: float
    interval: float

    @property
    def passed(self) -> bool:
        return self.timing.clock() >= self.end

    def elapsed(self) -> float:
        return round(self.timing.clock() - self.start, 1)

    def pause(self) -> None:
        """Sleep one poll interval, never past the deadline; the next one is longer."""
        self.timing.sleep(max(0.0, min(self.interval, self.end - self.timing.clock())))
        self.interval = min(self.interval * 2, self.timing.poll)
