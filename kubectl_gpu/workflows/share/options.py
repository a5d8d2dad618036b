"""How a sharing change is to be rolled out: the flags of `kubectl gpu share` as one value.

Owns `Options`, which every step of the rollout reads (the drain, the writes, the waits) and
the result carries back to the CLI. Must not import any other part of the workflow: the
modules that read the options import this one, never the other way round.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Options:
    """How to roll a change out, and where (flags of `kubectl gpu share`)."""

    dry_run: str = "none"  # none | client | server
    diff: bool = False  # preview only: never writes
    restart: bool = True
    wait: bool = False
    timeout: float = 300.0  # seconds, per restart batch and for --wait
    max_unavailable: int = 1
    drain: bool = False  # evict the pods the change hits, node by node (workflows.share.drain)
    drain_timeout: float = 300.0
    # go on although pods use a resource that shrinks or goes, or over a hand edit of a
    # node's config label or the ClusterPolicy's config (share rollback: of anything it wrote)
    force: bool = False
    yes: bool = False  # go on although the change restarts nodes the request did not select
    namespace: str | None = None
    configmap: str | None = None
    selector: str = ""  # -l: per-node scope by label selector

    @property
    def previewing(self) -> bool:
        return self.diff or self.dry_run == "client"
