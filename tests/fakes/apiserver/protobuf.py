"""Decoding the Kubernetes protobuf bodies that kubectl's typed `create` commands send.

`kubectl create configmap|secret|namespace|serviceaccount|role|clusterrole|rolebinding|
clusterrolebinding` (1.32) POSTs `application/vnd.kubernetes.protobuf`: the magic `k8s\\0`,
then a `runtime.Unknown` {typeMeta, raw}. Owns a small protobuf wire reader and the field
numbers of those types (from k8s.io/api and apimachinery `generated.proto`), producing the
same dict the JSON form would. Other kinds are answered 415. Must not encode protobuf:
the stand-in always answers in JSON, which clients accept.
"""

from __future__ import annotations

import base64
import datetime as dt
import struct
from typing import Any

from tests.fakes.apiserver import errors

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

# message → field number → (JSON name, type); "*T" is repeated T; "{k:v}" a map.
SCHEMAS: dict[str, dict[int, tuple[str, str]]] = {
    "Unknown": {1: ("typeMeta", "TypeMeta"), 2: ("raw", "rawbytes")},
    "TypeMeta": {1: ("apiVersion", "string"), 2: ("kind", "string")},
    "ObjectMeta": {
        1: ("name", "string"), 2: ("generateName", "string"), 3: ("namespace", "string"),
        5: ("uid", "string"), 6: ("resourceVersion", "string"), 7: ("generation", "int"),
        8: ("creationTimestamp", "Time"), 9: ("deletionTimestamp", "Time"),
        10: ("deletionGracePeriodSeconds", "int"), 11: ("labels", "{string:string}"),
        12: ("annotations", "{string:string}"), 13: ("ownerReferences", "*OwnerReference"),
        14: ("finalizers", "*string"),
    },
    "OwnerReference": {
        5: ("apiVersion", "string"), 1: ("kind", "string"), 3: ("name", "string"),
        4: ("uid", "string"), 6: ("controller", "bool"), 7: ("blockOwnerDeletion", "bool"),
    },
    "Time": {1: ("seconds", "int"), 2: ("nanos", "int")},
    "ConfigMap": {1: ("metadata", "ObjectMeta"), 2: ("data", "{string:string}"),
                  3: ("binaryData", "{string:bytes}"), 4: ("immutable", "bool")},
    "Secret": {1: ("metadata", "ObjectMeta"), 2: ("data", "{string:bytes}"), 3: ("type", "string"),
               4: ("stringData", "{string:string}"), 5: ("immutable", "bool")},
    "Namespace": {1: ("metadata", "ObjectMeta"), 2: ("spec", "NamespaceSpec")},
    "NamespaceSpec": {1: ("finalizers", "*string")},
    "ServiceAccount": {1: ("metadata", "ObjectMeta"), 2: ("secrets", "*ObjectReference"),
                       3: ("imagePullSecrets", "*LocalObjectReference"),
                       4: ("automountServiceAccountToken", "bool")},
    "ObjectReference": {1: ("kind", "string"), 2: ("namespace", "string"), 3: ("name", "string"),
                        4: ("uid", "string"), 5: ("apiVersion", "string"),
                        6: ("resourceVersion", "string"), 7: ("fieldPath", "string")},
    "LocalObjectReference": {1: ("name", "string")},
    "Role": {1: ("metadata", "ObjectMeta"), 2: ("rules", "*PolicyRule")},
    "ClusterRole": {1: ("metadata", "ObjectMeta"), 2: ("rules", "*PolicyRule"),
                    3: ("aggregationRule", "AggregationRule")},
    "AggregationRule": {1: ("clusterRoleSelectors", "*LabelSelector")},
    "LabelSelector": {1: ("matchLabels", "{string:string}"),
                      2: ("matchExpressions", "*LabelSelectorRequirement")},
    "LabelSelectorRequirement": {1: ("key", "string"), 2: ("operator", "string"),
                                 3: ("values", "*string")},
    "PolicyRule": {1: ("verbs", "*string"), 2: ("apiGroups", "*string"),
                   3: ("resources", "*string"), 4: ("resourceNames", "*string"),
                   5: ("nonResourceURLs", "*string")},
    "RoleBinding": {1: ("metadata", "ObjectMeta"), 2: ("subjects", "*Subject"),
                    3: ("roleRef", "RoleRef")},
    "ClusterRoleBinding": {1: ("metadata", "ObjectMeta"), 2: ("subjects", "*Subject"),
                           3: ("roleRef", "RoleRef")},
    "Subject": {1: ("kind", "string"), 2: ("apiGroup", "string"), 3: ("name", "string"),
                4: ("namespace", "string")},
    "RoleRef": {1: ("apiGroup", "string"), 2: ("kind", "string"), 3: ("name", "string")},
}  # fmt: skip


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        result |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not byte & 0x80:
            return result, pos


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs: ints for varint/fixed fields, bytes for delimited ones."""
    found: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            found.append((number, value))
        elif wire == 2:
            length, pos = _varint(data, pos)
            found.append((number, data[pos : pos + length]))
            pos += length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            found.append(
                (number, struct.unpack("<Q" if wire == 1 else "<I", data[pos : pos + size])[0])
            )
            pos += size
        else:
            raise ValueError(f"unsupported wire type {wire}")
    return found


def _scalar(kind: str, value: int | bytes) -> Any:
    if kind == "string":
        return bytes(value).decode() if isinstance(value, bytes) else str(value)
    if kind == "bytes":
        return base64.b64encode(bytes(value) if isinstance(value, bytes) else b"").decode()
    if kind == "rawbytes":
        return value
    if kind == "bool":
        return bool(value)
    if kind == "int":
        number = int(value) if isinstance(value, int) else 0
        return number - (1 << 64) if number >= 1 << 63 else number
    if not isinstance(value, bytes):
        raise ValueError(f"field of type {kind} is not length-delimited")
    if kind == "Time":
        seconds = decode_message("Time", value).get("seconds", 0)
        stamp = dt.datetime.fromtimestamp(seconds, dt.timezone.utc)
        return stamp.strftime("%Y-%m-%dT%H:%M:%SZ") if seconds else None
    return decode_message(kind, value)


def decode_message(message: str, data: bytes) -> dict[str, Any]:
    """One message as the dict its JSON form would give, empty values omitted."""
    schema = SCHEMAS[message]
    result: dict[str, Any] = {}
    for number, value in _fields(data):
        if number not in schema:
            continue
        name, kind = schema[number]
        if kind.startswith("{"):
            key_kind, value_kind = kind[1:-1].split(":")
            entry = dict(_fields(bytes(value) if isinstance(value, bytes) else b""))
            result.setdefault(name, {})[_scalar(key_kind, entry.get(1, b""))] = _scalar(
                value_kind, entry.get(2, b"")
            )
        elif kind.startswith("*"):
            result.setdefault(name, []).append(_scalar(kind[1:], value))
        else:
            result[name] = _scalar(kind, value)
    # Go writes unset strings and numbers as zero values; JSON would omit them. Bools here are
    # all pointers (written only when set), so a false one is kept.
    return {
        k: v for k, v in result.items() if isinstance(v, bool) or v not in ("", 0, None, {}, [])
    }


def decode(body: bytes) -> dict[str, Any]:
    """A protobuf request body as the object dict; unsupported kinds raise a 415."""
    if not body.startswith(MAGIC):
        raise errors.bad_request("the protobuf body does not start with the k8s magic number")
    try:
        unknown = decode_message("Unknown", body[len(MAGIC) :])
        type_meta = unknown.get("typeMeta", {})
        kind = str(type_meta.get("kind", ""))
        if kind not in SCHEMAS or "metadata" not in {n for n, _ in SCHEMAS[kind].values()}:
            raise errors.unsupported_media_type(
                MEDIA_TYPE, ["application/json", "application/yaml"]
            )
        obj = decode_message(kind, bytes(unknown.get("raw", b"")))
    except (ValueError, UnicodeDecodeError, struct.error) as exc:
        raise errors.bad_request(f"the protobuf body could not be decoded: {exc}") from exc
    return {"apiVersion": type_meta.get("apiVersion", ""), "kind": kind, **obj}
