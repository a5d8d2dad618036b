"""Placement rules the scheduler applies, re-checked per GPU node to say which one failed.

Owns kube-scheduler's FailedScheduling message grammar (`0/3 nodes are available: 1 Insufficient
nvidia.com/gpu, 2 node(s) had untolerated taint {nvidia.com/gpu: present}. preemption: …`;
1.34 and 1.37 write `untolerated taint(s)` and name none),
taints against tolerations (core/v1 semantics, NoSchedule and NoExecute block), and nodeSelector
plus required node affinity (In, NotIn, Exists, DoesNotExist, Gt, Lt; terms ORed). Must not
produce diagnoses (scheduler.py does). Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any

from kubectl_gpu.doctor.facts import Node, Pod, Taint

BLOCKING = ("NoSchedule", "NoExecute")
_HEAD = re.compile(r"^0/(?P<total>\d+) nodes are available: (?P<rest>.*)$", re.S)
_ITEM = re.compile(r"^(?P<count>\d+) (?P<reason>.+)$")


@dataclasses.dataclass(frozen=True)
class FitError:
    """One FailedScheduling message, read: how many nodes failed for which reason."""

    total: int
    reasons: tuple[tuple[int, str], ...]
    preemption: str  # the text after "preemption: ", "" when absent


def parse_fit_error(message: str) -> FitError | None:
    """Read kube-scheduler's FitError text; None when it is some other message.

    The scheduler writes the head, then the reasons joined by ", " and ended by ".", then what
    its PostFilter plugins say: since 1.34 DRA's "no new claims to deallocate, " may come before
    "preemption: …". Only the list holds counted reasons; the sentences after it are no reason.
    """
    found = _HEAD.match(message.strip())
    if not found:
        return None
    rest, _, preemption = found["rest"].partition("preemption: ")
    reasons = []
    for item in _split(_listed(rest)):
        parsed = _ITEM.match(item.strip())
        if parsed:
            reasons.append((int(parsed["count"]), parsed["reason"]))
    return FitError(int(found["total"]), tuple(reasons), preemption.strip())


def _listed(text: str) -> str:
    """The reasons list: up to the first "." that ends a sentence outside braces (a reason
    holds dots only inside names, `nvidia.com/gpu`, or in a taint's `{key: value}`)."""
    depth = 0
    for i, ch in enumerate(text):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "." and depth == 0 and text[i + 1 : i + 2] in ("", " "):
            return text[:i]
    return text


def _split(text: str) -> list[str]:
    """Split on ", " outside braces: a taint reads `{key: value}`."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


def tolerates(toleration: Mapping[str, Any], taint: Taint) -> bool:
    """Whether one toleration covers one taint."""
    effect = str(toleration.get("effect") or "")
    if effect and effect != taint.effect:
        return False
    key = str(toleration.get("key") or "")
    operator = str(toleration.get("operator") or "Equal")
    if not key:
        return operator == "Exists"
    if key != taint.key:
        return False
    return operator == "Exists" or str(toleration.get("value") or "") == taint.value


def untolerated(pod: Pod, node: Node) -> tuple[Taint, ...]:
    """The node's blocking taints the pod does not tolerate."""
    return tuple(
        t
        for t in node.taints
        if t.effect in BLOCKING and not any(tolerates(tol, t) for tol in pod.tolerations)
    )


def unmet(pod: Pod, node: Node) -> tuple[str, ...]:
    """The pod's node selector / required affinity the node does not meet, in words."""
    missed = [
        f"{k}={v} (node has {node.labels.get(k, '<unset>')})"
        for k, v in sorted(pod.node_selector.items())
        if node.labels.get(k) != v
    ]
    terms = pod.affinity_terms
    if terms is not None and not any(_term_holds(node, t) for t in terms):
        missed.append(f"required node affinity ({_describe_terms(terms)})")
    return tuple(missed)


def selector_keys(pod: Pod) -> tuple[str, ...]:
    """Every label key the pod selects nodes by (selector and affinity expressions)."""
    found = set(pod.node_selector)
    for term in pod.affinity_terms or ():
        found |= {str(e.get("key", "")) for e in term.get("matchExpressions") or []}
    return tuple(sorted(k for k in found if k))


def _term_holds(node: Node, term: Mapping[str, Any]) -> bool:
    expressions = list(term.get("matchExpressions") or [])
    fields = list(term.get("matchFields") or [])
    if not expressions and not fields:
        return False  # an empty term matches no node
    by_field = {"metadata.name": node.name}
    return all(_holds(node.labels, e) for e in expressions) and all(
        _holds(by_field, f) for f in fields
    )


def _holds(values: Mapping[str, str], expression: Mapping[str, Any]) -> bool:
    key, operator = str(expression.get("key", "")), str(expression.get("operator", ""))
    wanted = [str(v) for v in expression.get("values") or []]
    present = key in values
    checks = {
        "In": lambda: present and values[key] in wanted,
        "NotIn": lambda: not present or values[key] not in wanted,
        "Exists": lambda: present,
        "DoesNotExist": lambda: not present,
        "Gt": lambda: _compare(values.get(key), wanted, 1),
        "Lt": lambda: _compare(values.get(key), wanted, -1),
    }
    check = checks.get(operator)
    return bool(check()) if check else False


def _compare(have: str | None, wanted: list[str], sign: int) -> bool:
    if have is None or len(wanted) != 1:
        return False
    try:
        return (int(have) - int(wanted[0])) * sign > 0
    except ValueError:
        return False


def _describe_terms(terms: Iterable[Mapping[str, Any]]) -> str:
    described = []
    for term in terms:
        parts = [
            f"{e.get('key')} {e.get('operator')} {','.join(map(str, e.get('values') or []))}"
            for e in term.get("matchExpressions") or []
        ]
        described.append(" and ".join(p.strip() for p in parts) or "empty term")
    return " or ".join(described)
