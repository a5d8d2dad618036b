"""The immutable units the store keeps and announces: object revisions and changes.

Owns `Record` (one stored revision: the dict and its JSON bytes, serialised once so that
LIST and watch join bytes instead of re-encoding), `Change` (one committed write) and
`ObjectKey` (how subscribers are told which object changed). Must not mutate a record's
dict after it is built: readers share it without copying.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NamedTuple

from tests.fakes.apiserver.resources import ResourceType

ADDED, MODIFIED, DELETED, BOOKMARK, ERROR = "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"


def encode(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True)
class Record:
    """One revision of one object; `obj` is shared read-only, `raw` is its JSON."""

    obj: dict[str, Any]
    raw: bytes

    @classmethod
    def of(cls, obj: dict[str, Any]) -> Record:
        return cls(obj, encode(obj))

    def copy(self) -> dict[str, Any]:
        """A private dict for a caller who may change it (faster than deepcopy)."""
        result: dict[str, Any] = json.loads(self.raw)
        return result


class ObjectKey(NamedTuple):
    group: str
    version: str
    resource: str
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class Change:
    """One committed write, in commit order (its `rv` is the new resourceVersion)."""

    type: str
    rv: int
    rtype: ResourceType
    record: Record
    old: Record | None

    @property
    def key(self) -> ObjectKey:
        meta = self.record.obj["metadata"]
        return ObjectKey(
            self.rtype.group,
            self.rtype.version,
            self.rtype.plural,
            str(meta.get("namespace") or ""),
            str(meta["name"]),
        )

    def line(self, event_type: str) -> bytes:
        """The watch event for this change, one JSON document per line."""
        return b'{"type":"' + event_type.encode() + b'","object":' + self.record.raw + b"}\n"
