"""kubelet's device-manager checkpoint (`device-plugins/kubelet_internal_checkpoint`): its
entries derived from pods, its JSON in the current and pre-1.20 formats, written atomically as
kubelet's FileStore writes it, and damaged copies (docs/upstream-facts.md N1). Must not serve
gRPC."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tests.kit.node.kubelet.allocresp import encode_alloc_resp, nvidia_envvar_response
from tests.kit.node.kubelet.pods import NO_TOPOLOGY, Allocatable, Pod

CheckpointFormat = Literal["current", "pre-1.20"]
CorruptKind = Literal["truncated", "not-json", "wrong-shape"]


@dataclass(frozen=True)
class CheckpointEntry:
    """One ``PodDeviceEntries`` item: a (pod UID, container, resource) allocation."""

    pod_uid: str
    container: str
    resource: str
    ids_by_numa: Mapping[int, tuple[str, ...]]
    alloc_resp: bytes


def checkpoint_entries(pods: Iterable[Pod]) -> list[CheckpointEntry]:
    """Derive kubelet's entries from pods: one per container and resource, a device listed under
    every NUMA node of its topology, or under -1 without one (docs/upstream-facts.md N1.2). Each
    resource's plugin answers Allocate for its own devices only, so the default AllocResp is per
    entry."""
    entries = []
    for pod in pods:
        for container in pod.containers:
            for group in container.devices:
                numa = group.numa_nodes or (NO_TOPOLOGY,)
                response = container.alloc_resp or nvidia_envvar_response(group.ids)
                entry = CheckpointEntry(
                    pod_uid=pod.pod_uid,
                    container=container.name,
                    resource=group.resource,
                    ids_by_numa={node: group.ids for node in numa},
                    alloc_resp=encode_alloc_resp(response),
                )
                entries.append(entry)
    return entries


def registered_devices(allocatable: Allocatable) -> dict[str, list[str]]:
    """``RegisteredDevices``: resource → healthy device IDs (the allocatable ones)."""
    registered: dict[str, list[str]] = {}
    for group in allocatable.devices:
        registered.setdefault(group.resource, []).extend(group.ids)
    return registered


def _entry_document(entry: CheckpointEntry, fmt: CheckpointFormat) -> dict[str, Any]:
    if fmt == "current":
        # encoding/json writes map keys sorted as strings
        device_ids: Any = {
            str(node): list(ids)
            for node, ids in sorted(entry.ids_by_numa.items(), key=lambda kv: str(kv[0]))
        }
    else:
        device_ids = list(dict.fromkeys(i for ids in entry.ids_by_numa.values() for i in ids))
    return {
        "PodUID": entry.pod_uid,
        "ContainerName": entry.container,
        "ResourceName": entry.resource,
        "DeviceIDs": device_ids,
        "AllocResp": base64.b64encode(entry.alloc_resp).decode(),
    }


def stand_in_checksum(data: Mapping[str, Any]) -> int:
    """FNV-32a over the compact JSON of ``Data``. NOT kubelet's checksum, which hashes Go's spew
    dump of the structs); readers must not verify it (docs/upstream-facts.md N1.6)."""
    value = 0x811C9DC5
    for byte in json.dumps(data, separators=(",", ":")).encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def checkpoint_document(
    entries: Sequence[CheckpointEntry],
    registered: Mapping[str, Sequence[str]],
    fmt: CheckpointFormat = "current",
) -> dict[str, Any]:
    """The checkpoint as kubelet marshals it: Go field names as keys, nil slice → null."""
    data = {
        "PodDeviceEntries": [_entry_document(e, fmt) for e in entries] or None,
        "RegisteredDevices": {name: list(ids) for name, ids in sorted(registered.items())},
    }
    return {"Data": data, "Checksum": stand_in_checksum(data)}


def checkpoint_text(document: Mapping[str, Any]) -> str:
    """Compact JSON, non-ASCII kept as UTF-8, as Go's encoding/json writes it."""
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


def write_atomically(path: Path, content: bytes) -> None:
    """Write as kubelet's FileStore does: a ``.``-prefixed temp file, fsync, rename over the
    target, so readers never see a partial file and bind-mounted files keep the old inode."""
    temp = path.with_name(f".{path.name}.tmp")
    with open(temp, "wb") as handle:
        handle.write(content)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)


def corrupt_checkpoint_bytes(kind: CorruptKind, valid_text: str) -> bytes:
    """Damaged files: cut mid-write by a non-kubelet tool, not JSON, or JSON of the wrong shape."""
    if kind == "truncated":
        return valid_text.encode()[: max(1, len(valid_text) // 2)]
    if kind == "not-json":
        return b"\x00\xffkubelet_internal_checkpoint\x00"
    return json.dumps({"Data": {"PodDeviceEntries": "oops", "RegisteredDevices": []}}).encode()
