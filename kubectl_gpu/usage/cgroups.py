"""Which pod and container a host process belongs to, from its `/proc/<pid>/cgroup` text.

kubelet puts every container in a cgroup under the pod's, and names both (docs/top.md):
- cgroupfs driver: `/kubepods[/burstable|/besteffort]/pod<uid>/<container-id>`;
- systemd driver: `/kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid with _ for
  ->.slice/<runtime>-<container-id>.scope`, the runtime being `cri-containerd`, `docker`
  or `crio` (`crio-conmon-…` is CRI-O's monitor, not the container).
cgroup v1 files have a line per hierarchy (`4:memory:/kubepods/…`), v2 one line (`0::/…`);
the v2 line is preferred, then the first v1 line naming a pod. A path may sit under a
prefix (kind nodes: `/kubelet.slice/kubelet-kubepods.slice/…`, `/docker/<id>/kubepods/…`).
A process under no pod's cgroup (a system daemon, a leaked process) has no pod.

Owns parsing that text; the text is bounded (`MAX_BYTES`, `MAX_LINES`) by the caller and
again here. Must not read files (the agent does). Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
import re

MAX_BYTES = 16 * 1024  # a real file is a few hundred bytes (13 v1 hierarchies, long paths)
MAX_LINES = 64

_POD = re.compile(
    r"^(?:kubelet-)?(?:kubepods-(?:burstable-|besteffort-|guaranteed-)?)?"
    r"pod([0-9a-fA-F_-]{32,36})(?:\.slice)?$"
)
_SCOPE = re.compile(
    r"^(cri-containerd|docker|crio|containerd|libpod)-([0-9a-fA-F]{12,128})\.scope$"
)
_BARE_ID = re.compile(r"^[0-9a-fA-F]{12,128}$")
_UUID_DIGITS = 32


@dataclasses.dataclass(frozen=True)
class PodCgroup:
    """The pod (UID, with dashes as the API writes it) and container a process runs in;
    `container_id` is None for a process in the pod's cgroup but in no container's."""

    pod_uid: str
    container_id: str | None


def parse(text: str) -> PodCgroup | None:
    """The pod of the process whose cgroup file reads `text`; None when it is in no pod."""
    lines = text[:MAX_BYTES].splitlines()[:MAX_LINES]
    paths: list[str] = []
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, separator, path = rest.partition(":")
        if not separator or not hierarchy.isdigit():
            continue
        v2 = hierarchy == "0" and controllers == ""
        if v2:
            paths.insert(0, path)
        else:
            paths.append(path)
    for path in paths:
        found = pod_of_path(path)
        if found is not None:
            return found
    return None


def pod_of_path(path: str) -> PodCgroup | None:
    """The pod and container a cgroup path names, or None."""
    parts = [p for p in path.split("/") if p]
    for i, part in enumerate(parts):
        if i == 0 or not _under_kubepods(parts[:i]):
            continue
        match = _POD.match(part)
        if match is None:
            continue
        uid = _uid(match.group(1))
        if uid is None:
            continue
        container = _container_id(parts[i + 1]) if i + 1 < len(parts) else None
        return PodCgroup(uid, container)
    return None


def _under_kubepods(parents: list[str]) -> bool:
    return any(
        p == "kubepods" or "kubepods" in p.split("-") or p.endswith("kubepods.slice")
        for p in parents
    )


def _uid(text: str) -> str | None:
    """The UID with dashes; static pods' UIDs are 32 hex digits (a config hash), kept so."""
    digits = text.replace("_", "").replace("-", "")
    if len(digits) != _UUID_DIGITS:
        return None
    if len(text) == _UUID_DIGITS:
        return text.lower()
    d = digits.lower()
    return f"{d[:8]}-{d[8:12]}-{d[12:16]}-{d[16:20]}-{d[20:]}"


def _container_id(part: str) -> str | None:
    scope = _SCOPE.match(part)
    if scope is not None:
        return scope.group(2).lower()
    return part.lower() if _BARE_ID.match(part) else None
