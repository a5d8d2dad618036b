"""Pod status as a kubelet writes it: phases, conditions and complete container statuses.

Owns `ContainerRun` (the kubelet's memory of one container: start time, restarts, why it keeps
failing, its back-off) and turning a pod plus those runs into `status`: Running with ready
containers; CrashLoopBackOff with `lastState.terminated` exit 1 and a growing restartCount; an
init container failing (phase Pending, later containers `PodInitializing`); volumes that cannot
be mounted (`ContainerCreating`); an admission rejection (phase Failed). Every container status
is complete (image, imageID, containerID), as kubernetes 37's client requires. Must not decide
whether a container fails (runtimes do) or write anything.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ContainerRun:
    """One container as the kubelet remembers it."""

    started_at: str
    restarts: int = 0
    failing: str | None = None  # why it exited, while it is in back-off
    backoff: float = 10.0  # seconds, doubling to 300 as kubelet's does
    finished_at: str = ""


@dataclass(frozen=True)
class PodPlace:
    """Where and since when a pod runs."""

    host_ip: str
    pod_ip: str
    start_time: str


def _digest(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


def _image_id(image: str) -> str:
    repo = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
    return f"{repo}@sha256:{_digest(image)}"


def _base(pod: Obj, container: Obj, run: ContainerRun | None) -> Obj:
    image = str(container.get("image") or "")
    restarts = run.restarts if run else 0
    status: Obj = {
        "name": container["name"],
        "image": image,
        "imageID": _image_id(image) if run else "",
        "ready": False,
        "restartCount": restarts,
        "started": False,
        "state": {},
        "lastState": {},
    }
    if run is not None:
        uid = str(pod["metadata"]["uid"])
        status["containerID"] = "containerd://" + _digest(uid, container["name"], str(restarts))
    if run is not None and run.restarts:
        status["lastState"] = {
            "terminated": {
                "exitCode": 1,
                "reason": "Error",
                "startedAt": run.started_at,
                "finishedAt": run.finished_at or run.started_at,
                "containerID": "containerd://"
                + _digest(str(pod["metadata"]["uid"]), container["name"], str(restarts - 1)),
            }
        }
    return status


def _waiting(status: Obj, reason: str, message: str = "") -> Obj:
    status["state"] = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
    return status


def container_status(pod: Obj, container: Obj, run: ContainerRun, *, init: bool) -> Obj:
    status = _base(pod, container, run)
    if run.failing is not None:
        meta = pod["metadata"]
        message = (
            f"back-off {int(run.backoff)}s restarting failed container={container['name']} "
            f"pod={meta['name']}_{meta['namespace']}({meta['uid']})"
        )
        return _waiting(status, "CrashLoopBackOff", message)
    if init:
        status["ready"] = True
        status["state"] = {
            "terminated": {
                "exitCode": 0,
                "reason": "Completed",
                "startedAt": run.started_at,
                "finishedAt": run.started_at,
                "containerID": status["containerID"],
            }
        }
        return status
    status.update(ready=True, started=True, state={"running": {"startedAt": run.started_at}})
    return status


def _condition(kind: str, ok: bool, since: str, reason: str = "", message: str = "") -> Obj:
    condition: Obj = {"type": kind, "status": "True" if ok else "False"}
    condition.update(lastProbeTime=None, lastTransitionTime=since)
    if not ok and reason:
        condition.update(reason=reason, message=message)
    return condition


def _conditions(since: str, sandbox: bool, incomplete: list[str], unready: list[str]) -> list[Obj]:
    """The five pod conditions kubelet reports, with its reasons and messages."""
    not_ready = f"containers with unready status: [{' '.join(unready)}]"
    return [
        _condition("PodReadyToStartContainers", sandbox, since),
        _condition(
            "Initialized",
            not incomplete,
            since,
            "ContainersNotInitialized",
            f"containers with incomplete status: [{' '.join(incomplete)}]",
        ),
        _condition("Ready", not unready, since, "ContainersNotReady", not_ready),
        _condition("ContainersReady", not unready, since, "ContainersNotReady", not_ready),
        _condition("PodScheduled", True, since),
    ]


def _qos(pod: Obj) -> str:
    containers = (pod.get("spec") or {}).get("containers") or []
    for container in containers:
        resources = container.get("resources") or {}
        for section in ("requests", "limits"):
            if {"cpu", "memory"} & set(resources.get(section) or {}):
                return "Burstable"
    return "BestEffort"


def _statuses(pod: Obj, runs: Mapping[str, ContainerRun]) -> tuple[list[Obj], list[Obj], str]:
    """(init statuses, app statuses, the init container everything waits for or "")."""
    spec = pod.get("spec") or {}
    inits, apps = spec.get("initContainers") or [], spec.get("containers") or []
    blocked = next((c["name"] for c in inits if runs[c["name"]].failing is not None), "")
    init_statuses: list[Obj] = []
    reached = False
    for container in inits:
        if reached:
            init_statuses.append(_waiting(_base(pod, container, None), "PodInitializing"))
        else:
            init_statuses.append(
                container_status(pod, container, runs[container["name"]], init=True)
            )
        reached = reached or container["name"] == blocked
    app_statuses = [
        _waiting(_base(pod, c, None), "PodInitializing")
        if blocked
        else container_status(pod, c, runs[c["name"]], init=False)
        for c in apps
    ]
    return init_statuses, app_statuses, blocked


def render(pod: Obj, place: PodPlace, runs: Mapping[str, ContainerRun]) -> Obj:
    """The status of a started pod from its containers' runs."""
    init_statuses, app_statuses, blocked = _statuses(pod, runs)
    unready = [s["name"] for s in app_statuses if not s["ready"]]
    status: Obj = {
        "phase": "Pending" if blocked else "Running",
        "conditions": _conditions(place.start_time, True, [blocked] if blocked else [], unready),
        "hostIP": place.host_ip,
        "hostIPs": [{"ip": place.host_ip}],
        "podIP": place.pod_ip,
        "podIPs": [{"ip": place.pod_ip}],
        "startTime": place.start_time,
        "containerStatuses": app_statuses,
        "qosClass": _qos(pod),
    }
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    return status


def creating(pod: Obj, host_ip: str, since: str) -> Obj:
    """A pod whose volumes cannot be mounted yet: still Pending, containers ContainerCreating."""
    spec = pod.get("spec") or {}
    inits = spec.get("initContainers") or []
    apps = spec.get("containers") or []
    waiting = "PodInitializing" if inits else "ContainerCreating"
    status: Obj = {
        "phase": "Pending",
        "conditions": _conditions(
            since, False, [c["name"] for c in inits], [c["name"] for c in apps]
        ),
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": since,
        "containerStatuses": [_waiting(_base(pod, c, None), waiting) for c in apps],
        "qosClass": _qos(pod),
    }
    if inits:
        status["initContainerStatuses"] = [
            _waiting(_base(pod, c, None), "PodInitializing") for c in inits
        ]
    return status


def rejected(pod: Obj, reason: str, message: str, since: str) -> Obj:
    """Admission refused the pod: it fails without starting (kubelet's rejectPod)."""
    return {
        "phase": "Failed",
        "reason": reason,
        "message": f"Pod was rejected: {message}",
        "startTime": since,
        "qosClass": _qos(pod),
    }
