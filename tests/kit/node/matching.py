"""Which pods may run on which nodes, and what they ask for: what the simulated node side reads.

Owns nodeSelector and required node affinity matching (matchExpressions In, NotIn, Exists,
DoesNotExist, Gt, Lt; matchFields on metadata.name), integer quantities, and a pod's
extended-resource requests (limits imply requests for extended resources; init containers count
as the max, as the scheduler's resource fit does). Must not read the store: callers pass
objects in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Obj = dict[str, Any]
_NATIVE = {"cpu", "memory", "ephemeral-storage", "pods", "storage"}


def labels_of(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def selector_matches(node: Obj, pod_spec: Obj) -> bool:
    """nodeSelector and required node affinity both hold for `node`."""
    labels = labels_of(node)
    wanted = pod_spec.get("nodeSelector") or {}
    if any(labels.get(k) != v for k, v in wanted.items()):
        return False
    affinity = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if affinity is None:
        return True
    # Terms are ORed; an empty term list matches no node (core/v1 NodeSelector docs).
    return any(_term_matches(node, term) for term in affinity.get("nodeSelectorTerms") or [])


def _term_matches(node: Obj, term: Obj) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False  # "A null or empty node selector term matches no objects"
    labels = labels_of(node)
    by_field = {"metadata.name": str(node["metadata"]["name"])}
    return all(_expression_holds(labels, e) for e in expressions) and all(
        _expression_holds(by_field, f) for f in fields
    )


def _expression_holds(values: Mapping[str, str], expression: Obj) -> bool:
    key, operator = expression.get("key", ""), expression.get("operator", "")
    wanted = [str(v) for v in expression.get("values") or []]
    present = key in values
    if operator == "In":
        return present and values[key] in wanted
    if operator == "NotIn":
        return not present or values[key] not in wanted
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(wanted) == 1:
        try:
            have, limit = int(values[key]), int(wanted[0])
        except ValueError:
            return False
        return have > limit if operator == "Gt" else have < limit
    return False


def quantity(value: object) -> int:
    """An integer quantity ("4", 4, "1k"); extended resources are always whole numbers."""
    text = str(value).strip()
    suffixes = {"k": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    for suffix, factor in suffixes.items():
        if text.endswith(suffix) and text[: -len(suffix)].isdigit():
            return int(text[: -len(suffix)]) * factor
    try:
        return int(text)
    except ValueError:
        return 0


def is_extended(resource: str) -> bool:
    return resource not in _NATIVE and not resource.startswith("hugepages-")


def container_requests(container: Obj) -> dict[str, int]:
    """Extended resources one container asks for (limits imply equal requests)."""
    resources = container.get("resources") or {}
    asked = {k: quantity(v) for k, v in (resources.get("limits") or {}).items()}
    asked.update({k: quantity(v) for k, v in (resources.get("requests") or {}).items()})
    return {k: v for k, v in asked.items() if is_extended(k) and v > 0}


def is_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
