"""The `pods/log` subresource: container log text kept beside the store, served as text/plain.

Owns `LogStore` (per namespace, pod, container, and current or previous instance, thread-safe)
and the answer to `GET /api/v1/namespaces/NS/pods/NAME/log` with `container`, `tailLines`,
`limitBytes` and `previous`, including the real server's refusals: 404 for a missing pod, 400
`a container name must be specified …` when a pod has several containers and none is named,
400 `container X is not valid for pod Y`, and kubelet's 400 for a previous instance that never
ran. `follow` and `timestamps` are accepted and ignored (the text is answered once). Must not
store objects or speak HTTP: the server routes here and writes the bytes.
"""

from __future__ import annotations

import threading
from typing import Any

from tests.fakes.apiserver import errors
from tests.fakes.apiserver.store import ObjectStore

LogKey = tuple[str, str, str, bool]  # namespace, pod, container, previous


class LogStore:
    """What each container wrote to stdout/stderr; tests and simulated kubelets set it."""

    def __init__(self) -> None:
        self._texts: dict[LogKey, str] = {}
        self._lock = threading.Lock()

    def set(
        self, namespace: str, pod: str, container: str, text: str, previous: bool = False
    ) -> None:
        """Replace the log of one container instance (`previous`: the one before a restart)."""
        with self._lock:
            self._texts[(namespace, pod, container, previous)] = text

    def append(self, namespace: str, pod: str, container: str, line: str) -> None:
        """Add one line to the current instance's log."""
        with self._lock:
            key = (namespace, pod, container, False)
            self._texts[key] = self._texts.get(key, "") + line.rstrip("\n") + "\n"

    def get(self, namespace: str, pod: str, container: str, previous: bool = False) -> str | None:
        with self._lock:
            return self._texts.get((namespace, pod, container, previous))


def is_log_path(parts: list[str]) -> bool:
    """Whether the path is `/api/v1/namespaces/NS/pods/NAME/log`."""
    return (
        len(parts) == 7
        and parts[:3] == ["api", "v1", "namespaces"]
        and parts[4] == "pods"
        and parts[6] == "log"
    )


def read(store: ObjectStore, logs: LogStore, parts: list[str], query: dict[str, str]) -> bytes:
    """The log text a GET on a log path answers, or an `ApiError` as the real server's."""
    namespace, name = parts[3], parts[5]
    rtype = store.registry.get("", "v1", "pods")
    assert rtype is not None
    pod = store.read(rtype, namespace, name).obj
    container = _container(pod, name, query.get("container", ""))
    previous = query.get("previous") in ("true", "1")
    text = logs.get(namespace, name, container, previous)
    if text is None and previous:
        raise errors.bad_request(
            f'previous terminated container "{container}" in pod "{name}" not found'
        )
    return _limit(_tail(text or "", query.get("tailLines")), query.get("limitBytes"))


def _container(pod: dict[str, Any], name: str, asked: str) -> str:
    spec = pod.get("spec") or {}
    names = [
        str(c.get("name"))
        for part in ("initContainers", "containers", "ephemeralContainers")
        for c in spec.get(part) or []
    ]
    if asked:
        if asked not in names:
            raise errors.bad_request(f"container {asked} is not valid for pod {name}")
        return asked
    apps = [str(c.get("name")) for c in spec.get("containers") or []]
    if len(apps) == 1:
        return apps[0]
    raise errors.bad_request(
        f"a container name must be specified for pod {name}, choose one of: [{' '.join(apps)}]"
    )


def _tail(text: str, lines: str | None) -> str:
    if lines is None or lines == "":
        return text
    count = _number(lines, "tailLines", 0)
    kept = text.splitlines(keepends=True)
    return "".join(kept[-count:]) if count else ""


def _limit(text: str, limit: str | None) -> bytes:
    data = text.encode()
    if limit is None or limit == "":
        return data
    return data[: _number(limit, "limitBytes", 1)]


def _number(text: str, field: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError as exc:
        raise errors.bad_request(f"invalid {field} {text!r}") from exc
    if value < least:
        bound = "greater than 0" if least else "greater than or equal to 0"
        raise errors.bad_request(f"{field}: Invalid value: {value}: must be {bound}")
    return value
