"""Object metadata checks the real API server makes on every write.

Owns the name, label and annotation rules (RFC 1123 names, qualified label keys, label
values) and their real error wording, returned as (field, reason, message) causes for a
422 Invalid. Must not check resource-specific schemas: the stand-in stores any spec.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.fakes.apiserver.resources import ResourceType

Cause = tuple[str, str, str]

_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_NAME_PART = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE = r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    f"for validation is '{_SUBDOMAIN}')"
)
DNS_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used "
    f"for validation is '{_DNS_LABEL}')"
)
NAME_PART_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    f"validation is '{_NAME_PART}')"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value', "
    f" or '12345', regex used for validation is '{_LABEL_VALUE}')"
)
_ANNOTATIONS_LIMIT = 256 * 1024

# Resources whose names are RFC 1123 labels, or free path segments, rather than subdomains.
_LABEL_NAMED = {("", "namespaces"), ("", "services")}
_SEGMENT_NAMED = {
    ("rbac.authorization.k8s.io", p)
    for p in ("roles", "rolebindings", "clusterroles", "clusterrolebindings")
}


_COMPILED: dict[str, re.Pattern[str]] = {}


def _full(pattern: str, text: str) -> bool:
    compiled = _COMPILED.get(pattern) or _COMPILED.setdefault(pattern, re.compile(pattern))
    return compiled.fullmatch(text) is not None


def name_problems(rtype: ResourceType, name: str) -> list[str]:
    """Why `name` is not a valid object name for `rtype` (empty list when it is)."""
    if rtype.storage in _SEGMENT_NAMED:
        if name in (".", "..") or "/" in name or "%" in name:
            return [f"may not contain '/' or '%' and may not be '.' or '..': {name!r}"]
        return []
    if rtype.storage in _LABEL_NAMED:
        too_long = "must be no more than 63 characters"
        return ([] if _full(_DNS_LABEL, name) else [DNS_LABEL_MSG]) + (
            [too_long] if len(name) > 63 else []
        )
    problems = [] if _full(_SUBDOMAIN, name) else [SUBDOMAIN_MSG]
    if len(name) > 253:
        problems.append("must be no more than 253 characters")
    return problems


def qualified_name_problems(key: str) -> list[str]:
    """Problems with a label or annotation key: `[prefix/]name`."""
    prefix, slash, name = key.rpartition("/")
    problems: list[str] = []
    if slash and (not prefix or not _full(_SUBDOMAIN, prefix)):
        problems.append(f"prefix part {SUBDOMAIN_MSG}")
    if not name:
        problems.append("name part must be non-empty")
    elif not _full(_NAME_PART, name):
        problems.append(NAME_PART_MSG)
    if len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    return problems


def label_value_problems(value: str) -> list[str]:
    problems = [] if _full(_LABEL_VALUE, value) else [LABEL_VALUE_MSG]
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    return problems


def _invalid(field: str, value: object, message: str) -> Cause:
    return (field, "FieldValueInvalid", f"Invalid value: {json.dumps(value)}: {message}")


def metadata_causes(rtype: ResourceType, meta: dict[str, Any]) -> list[Cause]:
    """Every metadata problem in an object about to be written."""
    name = meta.get("name")
    if not name:
        required = "Required value: name or generateName is required"
        return [("metadata.name", "FieldValueRequired", required)]
    if not isinstance(name, str):
        return [_invalid("metadata.name", name, "must be a string")]
    causes = [_invalid("metadata.name", name, m) for m in name_problems(rtype, name)]
    causes += _map_causes("metadata.labels", meta.get("labels"), label_value_problems)
    causes += _map_causes("metadata.annotations", meta.get("annotations"), None)
    annotations = meta.get("annotations")
    if isinstance(annotations, dict) and len(json.dumps(annotations)) > _ANNOTATIONS_LIMIT:
        causes.append(
            (
                "metadata.annotations",
                "FieldValueTooLong",
                "Too long: must have at most 262144 bytes",
            )
        )
    return causes


def _map_causes(field: str, mapping: object, value_rule: Any) -> list[Cause]:
    if mapping is None:
        return []
    if not isinstance(mapping, dict):
        return [_invalid(field, mapping, "must be a map of strings")]
    causes: list[Cause] = []
    for key, value in mapping.items():
        causes += [_invalid(field, key, m) for m in qualified_name_problems(key)]
        if not isinstance(value, str):
            causes.append(_invalid(f"{field}[{key}]", value, "must be a string"))
        elif value_rule is not None:
            causes += [_invalid(field, value, m) for m in value_rule(value)]
    return causes
