"""The rollback record: what a sharing change replaced, kept so that it can be restored.

Owns `Record` (the previous text of every key written, the previous value of every node label
changed, the ClusterPolicy's previous config and the resource verified) and its JSON form in
the ConfigMap annotation `kubectl-gpu.io/previous-config`. Written with the ConfigMap in the
same request, so a record never describes a change that did not happen. Must not decide what
to restore (targets.py does). Pure: standard library and kubectl_gpu.errors only.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from kubectl_gpu import errors

VERSION = 1
MAX_RECORD_CHARS = 200_000  # annotations share a 256 KiB budget per object


@dataclasses.dataclass(frozen=True)
class Record:
    """What one change replaced."""

    resource: str
    keys: Mapping[str, str | None]  # key -> previous text; None: the key did not exist
    labels: Mapping[str, str | None]  # node -> previous label value; None: unlabelled
    policy_changed: bool = False
    policy: tuple[str, str] | None = None  # the ClusterPolicy's previous (name, default)

    def encode(self) -> str:
        """The annotation's value."""
        body: dict[str, Any] = {
            "version": VERSION,
            "resource": self.resource,
            "keys": dict(self.keys),
            "labels": dict(self.labels),
        }
        if self.policy_changed:
            body["clusterPolicyConfig"] = (
                None if self.policy is None else {"name": self.policy[0], "default": self.policy[1]}
            )
        return json.dumps(body, sort_keys=True, separators=(",", ":"))


def decode(text: str, where: str) -> Record:
    """Read an annotation written by `Record.encode`; ConfigError when it is not one."""
    try:
        body = json.loads(text) if len(text) <= MAX_RECORD_CHARS else None
        return _from_dict(body)
    except (ValueError, TypeError, KeyError) as e:
        raise errors.ConfigError(
            f"the rollback record on {where} cannot be read ({e})",
            hint="restore the previous config by hand; `kubectl gpu share show` shows what "
            "each node reads",
        ) from e


def _from_dict(body: Any) -> Record:
    if not isinstance(body, dict) or body.get("version") != VERSION:
        raise ValueError(f"not a version {VERSION} record")
    keys, labels = _optional_strings(body["keys"]), _optional_strings(body["labels"])
    policy_changed = "clusterPolicyConfig" in body
    policy = body.get("clusterPolicyConfig")
    return Record(
        resource=str(body["resource"]),
        keys=keys,
        labels=labels,
        policy_changed=policy_changed,
        policy=None if policy is None else (str(policy["name"]), str(policy["default"])),
    )


def _optional_strings(value: Any) -> dict[str, str | None]:
    if not isinstance(value, dict):
        raise TypeError("expected a mapping")
    if not all(isinstance(v, str | None) for v in value.values()):
        raise TypeError("expected text or null values")
    return {str(k): v for k, v in value.items()}
