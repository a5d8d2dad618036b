"""The rollback history: what each sharing change replaced, kept so that it can be restored.

Owns `Record` (the previous text of every key written, the text written over it, the previous
value of every node label changed and the value written, the ClusterPolicy's previous config
and the one written, and the resource verified: what was written lets `share rollback` tell a
hand edit made since) and the history's JSON
form in the ConfigMap annotation `kubectl-gpu.io/previous-config`: the newest records first,
at most `MAX_HISTORY` of them and `MAX_RECORD_CHARS` in all (older ones are dropped, and
counted), so that `share rollback` can always read it. `share rollback` restores the newest and
removes it: run again, it goes one change further back. A version 1 annotation (one record)
is still read. Written with the ConfigMap in the same request, so a record never describes a
change that did not happen. Must not decide what to restore (rollback.py does). Pure: standard
library and kubectl_gpu.errors only.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from kubectl_gpu import errors

VERSION = 1  # one record, as written before the history
HISTORY_VERSION = 2
MAX_RECORD_CHARS = 200_000  # annotations share a 256 KiB budget per object
MAX_HISTORY = 10  # changes `share rollback` can undo, one at a time
_ENVELOPE = 100  # characters of the history around its records


class RecordTooLarge(errors.ConfigError):
    """A change replaces more text than its record can keep: it must not be made."""


@dataclasses.dataclass(frozen=True)
class Record:
    """What one change replaced."""

    resource: str
    keys: Mapping[str, str | None]  # key -> previous text; None: the key did not exist
    labels: Mapping[str, str | None]  # node -> previous label value; None: unlabelled
    policy_changed: bool = False
    policy: tuple[str, str] | None = None  # the ClusterPolicy's previous (name, default)
    written: Mapping[str, str] = dataclasses.field(default_factory=dict)  # key -> text written
    # node -> label value written (None: removed); None when not kept (older records)
    written_labels: Mapping[str, str | None] | None = None
    # the ClusterPolicy's (name, default) written, when `policy_changed` and it was kept
    written_policy: tuple[str, str] | None = None
    written_policy_kept: bool = False

    def encode(self) -> str:
        """This record alone, as a version 1 annotation."""
        return _dumps(self.body())

    def body(self) -> dict[str, Any]:
        """The record as JSON data."""
        body: dict[str, Any] = {
            "version": VERSION,
            "resource": self.resource,
            "keys": dict(self.keys),
            "labels": dict(self.labels),
        }
        if self.written:  # absent from records written before it was kept
            body["written"] = dict(self.written)
        if self.written_labels is not None:
            body["writtenLabels"] = dict(self.written_labels)
        if self.policy_changed:
            body["clusterPolicyConfig"] = _policy_body(self.policy)
            if self.written_policy_kept:
                body["writtenClusterPolicyConfig"] = _policy_body(self.written_policy)
        return body


def _policy_body(policy: tuple[str, str] | None) -> dict[str, str] | None:
    return None if policy is None else {"name": policy[0], "default": policy[1]}


def _policy_of(body: Any) -> tuple[str, str] | None:
    return None if body is None else (str(body["name"]), str(body["default"]))


@dataclasses.dataclass(frozen=True)
class History:
    """The annotation after a change: its text, and how many older records were dropped."""

    text: str | None  # None: no record is left (remove the annotation)
    dropped: int = 0


def push(existing: str, record: Record, where: str) -> History:
    """The history with `record` as its newest entry, within the annotation's limit.

    RecordTooLarge when `record` alone cannot be kept: the change must not be made, or it
    could never be rolled back. An unreadable older history is replaced (and counted).
    """
    newest = record.body()
    size = len(_dumps(newest)) + _ENVELOPE
    if size > MAX_RECORD_CHARS:
        raise RecordTooLarge(
            f"the change would replace {size - _ENVELOPE:,} characters of config on {where}, "
            f"more than its rollback record can keep ({MAX_RECORD_CHARS:,} characters in the "
            "annotation); nothing was written",
            hint="make the key smaller (comments, unused resources), or save the ConfigMap "
            "(kubectl get configmap -o yaml) and edit it by hand",
        )
    try:
        older, dropped = _entries(existing, where)
        damaged = 0
    except errors.ConfigError:
        older, dropped, damaged = [], 0, 1
    kept = [newest]
    for body in older[: MAX_HISTORY - 1]:
        size += len(_dumps(body)) + 1
        if size > MAX_RECORD_CHARS:
            break
        kept.append(body)
    lost = len(older) - (len(kept) - 1) + damaged
    return History(_history(kept, dropped + lost), lost)


def pop(existing: str, where: str) -> History:
    """The history after its newest record was rolled back."""
    older, dropped = _entries(existing, where)
    rest = older[1:]
    return History(_history(rest, dropped) if rest else None)


def decode(text: str, where: str) -> Record:
    """The newest record of a history (or of a version 1 annotation); ConfigError when none."""
    entries, _ = _entries(text, where)
    if not entries:
        raise _unreadable(where, ValueError("no record in the history"))
    return _from_dict(entries[0])


def history(text: str) -> tuple[Record, ...]:
    """Every record of a history, newest first; none when there is no readable history (a
    change then replaces it, as `push` does)."""
    try:
        entries, _ = _entries(text, "")
    except errors.ConfigError:
        return ()
    return tuple(_from_dict(entry) for entry in entries)


def depth(text: str) -> tuple[int, int]:
    """How many changes the history can undo, and how many older ones were dropped."""
    try:
        entries, dropped = _entries(text, "")
    except errors.ConfigError:
        return 0, 0
    return len(entries), dropped


def _entries(text: str, where: str) -> tuple[list[dict[str, Any]], int]:
    """The records of an annotation, newest first, and the dropped count; ConfigError naming
    `where` when it cannot be read."""
    if not text:
        return [], 0
    try:
        body = json.loads(text) if len(text) <= MAX_RECORD_CHARS else None
        if isinstance(body, dict) and body.get("version") == HISTORY_VERSION:
            entries = list(body["history"])
            for entry in entries:
                _from_dict(entry)  # each one readable, or the history is not
            return entries, int(body.get("dropped", 0))
        if not isinstance(body, dict):
            raise ValueError(f"not a version {VERSION} record")
        _from_dict(body)  # a version 1 record, or a ValueError
        return [body], 0
    except (ValueError, TypeError, KeyError, RecursionError) as e:
        raise _unreadable(where, e) from e


def _history(entries: list[dict[str, Any]], dropped: int) -> str:
    return _dumps({"version": HISTORY_VERSION, "history": entries, "dropped": dropped})


def _dumps(body: Any) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def _unreadable(where: str, e: BaseException) -> errors.ConfigError:
    return errors.ConfigError(
        f"the rollback record on {where} cannot be read ({e})",
        hint="restore the previous config by hand; `kubectl gpu share show` shows what "
        "each node reads",
    )


def _from_dict(body: Any) -> Record:
    if not isinstance(body, dict) or body.get("version") != VERSION:
        raise ValueError(f"not a version {VERSION} record")
    keys, labels = _optional_strings(body["keys"]), _optional_strings(body["labels"])
    policy_changed = "clusterPolicyConfig" in body
    policy = body.get("clusterPolicyConfig")
    written = _optional_strings(body.get("written", {}))
    written_labels = body.get("writtenLabels")
    return Record(
        resource=str(body["resource"]),
        keys=keys,
        labels=labels,
        policy_changed=policy_changed,
        policy=_policy_of(policy),
        written={k: v for k, v in written.items() if v is not None},
        written_labels=None if written_labels is None else _optional_strings(written_labels),
        written_policy=_policy_of(body.get("writtenClusterPolicyConfig")),
        written_policy_kept="writtenClusterPolicyConfig" in body,
    )


def _optional_strings(value: Any) -> dict[str, str | None]:
    if not isinstance(value, dict):
        raise TypeError("expected a mapping")
    if not all(isinstance(v, str | None) for v in value.values()):
        raise TypeError("expected text or null values")
    return {str(k): v for k, v in value.items()}
