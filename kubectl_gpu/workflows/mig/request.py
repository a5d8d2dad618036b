"""What `kubectl gpu mig apply` is asked: a config, by name, for some nodes, and how.

Owns `ApplyRequest`, read by every step of the apply (the checks, the writes, the waits, the
account of an interruption). Must not import any other part of the workflow: the modules that
read the request import this one, never the other way round.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kubectl_gpu.workflows.mig.targets import Scope
from kubectl_gpu.workflows.waiting import Timing

Json = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class ApplyRequest:
    """What the user asked: a config (by name, from a parsed file) for some nodes."""

    file: str  # as given (-f), for messages
    document: Json  # the parsed mig-parted file
    config: str
    scope: Scope
    dry_run: str = "none"  # none | client | server
    force: bool = False
    wait: bool = False
    timeout: float = 300.0
    namespace: str | None = None  # -n: our namespace, or the operator's
    drain: bool = False  # evict the pods the change hits first (workflows.drain)
    drain_timeout: float = 300.0  # how long an eviction may keep being refused, per node
    max_unavailable: int = 1  # nodes drained at once
    timing: Timing | None = None  # tests: a quicker poll
