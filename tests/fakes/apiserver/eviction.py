"""The `pods/eviction` subresource: delete a pod only as its PodDisruptionBudget allows.

Owns the answer to `POST /api/v1/namespaces/NS/pods/NAME/eviction` (a policy/v1 `Eviction`)
as kube-apiserver's eviction REST gives it (pkg/registry/core/pod/storage/eviction.go): 404
for a missing pod; a pod that has ended, or is not running yet, is deleted at once; a pod
covered by more than one PDB is a 500 (`This pod has more than one PodDisruptionBudget, which
the eviction subresource does not support.`); a pod covered by one is deleted only while the
budget allows a disruption (healthy pods above `minAvailable`, or fewer than `maxUnavailable`
unhealthy, integers or percentages), else 429 TooManyRequests `Cannot evict pod as it would
violate the pod's disruption budget.` with a `DisruptionBudget` cause. Success is 201 with a
`Status`. Must not speak HTTP: the server routes here and writes the bytes.
"""

from __future__ import annotations

import json
import math
from typing import Any

from tests.fakes.apiserver import errors
from tests.fakes.apiserver.store import ListQuery, ObjectStore

Obj = dict[str, Any]
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
MANY = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
    "support."
)


def is_eviction_path(parts: list[str]) -> bool:
    """Whether the path is `/api/v1/namespaces/NS/pods/NAME/eviction`."""
    return (
        len(parts) == 7
        and parts[:3] == ["api", "v1", "namespaces"]
        and parts[4] == "pods"
        and parts[6] == "eviction"
    )


def evict(store: ObjectStore, parts: list[str], body: bytes) -> bytes:
    """Evict the pod the path names, or raise the `ApiError` the real server answers."""
    namespace, name = parts[3], parts[5]
    _check_body(body, namespace, name)
    pods = store.registry.get("", "v1", "pods")
    assert pods is not None
    pod = store.read(pods, namespace, name).obj
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Running",) and not (pod.get("metadata") or {}).get("deletionTimestamp"):
        _check_budget(store, namespace, pod)
    store.remove(pods, namespace, name)
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    return json.dumps({**status, "code": 201}).encode()


def _check_body(body: bytes, namespace: str, name: str) -> None:
    try:
        eviction = json.loads(body or b"{}")
    except ValueError as exc:
        raise errors.bad_request(f"couldn't get version/kind; json parse error: {exc}") from exc
    meta = eviction.get("metadata") or {}
    if eviction.get("kind") != "Eviction" or meta.get("name") != name:
        raise errors.bad_request(f"name in URL does not match name in Eviction object ({name})")
    if meta.get("namespace", namespace) != namespace:
        raise errors.bad_request("namespace in URL does not match namespace in Eviction object")


def _check_budget(store: ObjectStore, namespace: str, pod: Obj) -> None:
    budgets = [b for b in _budgets(store, namespace) if _selects(b, pod)]
    if not budgets:
        return
    if len(budgets) > 1:
        raise errors.ApiError(500, "InternalError", MANY, {})
    budget = budgets[0]
    covered = [p for p in _pods(store, namespace) if _selects(budget, p)]
    healthy = sum(_healthy(p) for p in covered)
    if healthy - _desired(budget, len(covered)) <= 0:
        name = budget["metadata"]["name"]
        cause = (
            f"The disruption budget {name} needs {_desired(budget, len(covered))} healthy pods "
            f"and has {healthy} currently"
        )
        details = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
        raise errors.ApiError(429, "TooManyRequests", VIOLATION, details)


def _desired(budget: Obj, expected: int) -> int:
    spec = budget.get("spec") or {}
    if "minAvailable" in spec:
        return _amount(spec["minAvailable"], expected, round_up=True)
    unavailable = _amount(spec.get("maxUnavailable", 0), expected, round_up=True)
    return max(expected - unavailable, 0)


def _amount(value: Any, expected: int, round_up: bool) -> int:
    text = str(value)
    if text.endswith("%"):
        share = expected * int(text[:-1]) / 100
        return math.ceil(share) if round_up else math.floor(share)
    return int(text)


def _healthy(pod: Obj) -> bool:
    status = pod.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    deleting = (pod.get("metadata") or {}).get("deletionTimestamp")
    return status.get("phase") == "Running" and ready and not deleting


def _budgets(store: ObjectStore, namespace: str) -> list[Obj]:
    rtype = store.registry.get("policy", "v1", "poddisruptionbudgets")
    assert rtype is not None
    return [r.obj for r in store.query(rtype, namespace, ListQuery()).items]


def _pods(store: ObjectStore, namespace: str) -> list[Obj]:
    rtype = store.registry.get("", "v1", "pods")
    assert rtype is not None
    return [r.obj for r in store.query(rtype, namespace, ListQuery()).items]


def _selects(budget: Obj, pod: Obj) -> bool:
    """A LabelSelector (matchLabels, matchExpressions) against the pod's labels; an empty
    selector selects every pod of the namespace (policy/v1)."""
    selector = (budget.get("spec") or {}).get("selector") or {}
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(_expression(e, labels) for e in selector.get("matchExpressions") or [])


def _expression(expression: Obj, labels: dict[str, str]) -> bool:
    key, op = expression.get("key", ""), expression.get("operator", "")
    values = expression.get("values") or []
    return {
        "In": key in labels and labels[key] in values,
        "NotIn": key not in labels or labels[key] not in values,
        "Exists": key in labels,
        "DoesNotExist": key not in labels,
    }.get(op, False)
