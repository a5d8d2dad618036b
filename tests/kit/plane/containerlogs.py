"""Container logs on the real control plane: kept as a kubelet keeps them, served by KWOK.

Owns `ContainerLogFiles`, a `LogStore` (what the simulated node side writes: each agent's
output, the reason a container crashed, the run before a restart) that also writes every
container instance's log to a file in the CRI format a kubelet's runtime writes
(`2026-11-25T22:00:00.123456789Z stdout F text`, the format KWOK reads with
k8s.io/cri-client), and keeps one KWOK `Logs` object per pod naming those files. Then
`kubectl logs` goes the real way: kube-apiserver finds the pod's node, dials its kubelet endpoint
(KWOK's server, `ControlPlane.with_kubelet`) and streams what KWOK reads from the file. Must
not decide what a container writes.
"""

from __future__ import annotations

import datetime as dt
import threading
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.kit.kube import ApiError

if TYPE_CHECKING:
    from tests.kit.plane.plane import ControlPlane

_MANAGER = "kubectl-gpu-tests-container-logs"
_WRITTEN = "test.kubectl-gpu.io/logs-written"  # changes each time a Logs object is named again
LogKey = tuple[str, str, str, bool]  # namespace, pod, container, previous


class LogStore:
    """What each container wrote to stdout/stderr, as the simulated node side sets it."""

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

    def name_again(self, namespace: str, pod: str) -> None:
        """Point the server at the pod's logs once more (only logs a server reads need it)."""

    def close(self) -> None:
        """Keep nothing more on disk (only logs kept as files need it)."""

    def texts(self) -> dict[LogKey, str]:
        """Every container instance's log so far."""
        with self._lock:
            return dict(self._texts)


class ContainerLogFiles(LogStore):
    """Every container's log as a file, and the `Logs` object that points KWOK at it."""

    def __init__(self, plane: ControlPlane, directory: Path) -> None:
        super().__init__()
        self.plane = plane
        self.dir = directory
        self._files_lock = threading.Lock()
        self._closed = False
        # (namespace, pod) -> {container: has a previous instance}: what each Logs object names
        self._named: dict[tuple[str, str], dict[str, bool]] = {}

    def set(
        self, namespace: str, pod: str, container: str, text: str, previous: bool = False
    ) -> None:
        super().set(namespace, pod, container, text, previous)
        lines = text.splitlines()
        if self._write(self.file(namespace, pod, container, previous), "w", lines):
            self._name(namespace, pod, container, previous)

    def append(self, namespace: str, pod: str, container: str, line: str) -> None:
        super().append(namespace, pod, container, line)
        if self._write(self.file(namespace, pod, container, False), "a", [line.rstrip("\n")]):
            self._name(namespace, pod, container, False)

    def _write(self, path: Path, mode: str, lines: list[str]) -> bool:
        """Write (or add) an instance's lines; False, writing nothing, once the cluster's log
        root is gone: a node program's last line after its cluster ended (its reader thread
        may still be draining the pipe while the cluster's files are removed)."""
        with self._files_lock:
            if self._closed or not self.dir.is_dir():
                return False
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open(mode) as handle:
                handle.write("".join(_cri_line(line) for line in lines))
        return True

    def close(self) -> None:
        """Write no file from now on; once this returns, no write is under way, so the
        folder can go. (Checking that it exists before each write was not enough: a reader
        thread's mkdir raced the removal and raised FileExistsError in a CI run.)"""
        with self._files_lock:
            self._closed = True

    def file(self, namespace: str, pod: str, container: str, previous: bool = False) -> Path:
        """Where the log of one container instance is kept (as under /var/log/pods)."""
        return self.dir / namespace / pod / container / ("0.log" if previous else "1.log")

    def _name(self, namespace: str, pod: str, container: str, previous: bool) -> None:
        """Make the pod's `Logs` object name this container (and its previous run) once."""
        with self._files_lock:
            named = self._named.setdefault((namespace, pod), {})
            if container in named and (named[container] or not previous):
                return
            named[container] = named.get(container, False) or previous
            now = dict(named)
            if self._closed:  # the cluster ended: its files are going
                return
            self._empty().touch()
        self._apply(namespace, pod, now)

    def name_again(self, namespace: str, pod: str) -> None:
        """Write the pod's `Logs` object again, marked as a new generation: KWOK's server reads
        Logs through an informer, and on a loaded machine one was seen not to serve a log
        named 30 s earlier; a fresh update event makes it read the object again."""
        with self._files_lock:
            named = dict(self._named.get((namespace, pod), {}))
        if named:
            self._apply(namespace, pod, named, fresh=True)

    def _empty(self) -> Path:
        """The log of a container that wrote nothing yet (empty, as on a kubelet)."""
        return self.dir / "empty.log"

    def _entry(self, namespace: str, pod: str, container: str, previous: bool) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "containers": [container],
            "logsFile": str(self.file(namespace, pod, container)),
        }
        if previous:
            entry["previousLogsFile"] = str(self.file(namespace, pod, container, True))
        return entry

    def _apply(self, namespace: str, pod: str, named: dict[str, bool], fresh: bool = False) -> None:
        """Write the pod's `Logs` object naming each of `named` (container: has a previous
        run); KWOK takes the first entry without `containers` for a container no entry names,
        so the pod's other containers get the empty log."""
        logs = [self._entry(namespace, pod, c, prev) for c, prev in sorted(named.items())]
        logs.append({"logsFile": str(self._empty())})
        metadata: dict[str, Any] = {"name": pod, "namespace": namespace}
        if fresh:
            metadata["annotations"] = {_WRITTEN: _now()}
        body = {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Logs",
            "metadata": metadata,
            "spec": {"logs": logs},
        }
        path = (
            f"/apis/kwok.x-k8s.io/v1alpha1/namespaces/{urllib.parse.quote(namespace)}"
            f"/logs/{urllib.parse.quote(pod)}?fieldManager={_MANAGER}&force=true"
        )
        try:
            self.plane.request("PATCH", path, body, "application/apply-patch+yaml")
        except ApiError as exc:
            # the pod's namespace is gone or going: nobody can ask for its logs any more
            if exc.code not in (403, 404):
                raise


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _cri_line(text: str) -> str:
    return f"{_now()} stdout F {text}\n"
