"""Layers 3 to 5, on the node: kubelet allocation, runtime injection, host driver.

Owns the verdicts for a pod that has a node: kubelet's admission refusals
(`UnexpectedAdmissionError`, e.g. the plugin's failRequestsGreaterThanOne wording, devices
unavailable; `OutOf<resource>`), the device plugin pod on that node missing or crash-looping,
the requested resource gone from the node's allocatable, and container events and messages
naming CUDA, NVML, the NVIDIA container runtime or the driver. Also `NVIDIA_VISIBLE_DEVICES`
set by hand in the spec, which fights the device plugin's injection. Pure: standard library
and the sharing survey's PluginPod.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from kubectl_gpu.doctor.facts import Event, Node, Pod
from kubectl_gpu.doctor.model import Diagnosis, Layer
from kubectl_gpu.sharing.rollout.status import PluginPod

VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
SHARED_LIMIT = "maximum request size for shared resources is 1"
UNAVAILABLE = "requested number of devices unavailable"
# Lower-case fragments, most specific first: which layer a message about GPUs points at.
_DRIVER_MARKS = (
    "driver/library version mismatch",
    "failed to initialize nvml",
    "nvml: ",
    "cuda driver version is insufficient",
    "nvidia driver",
    "nvidia-smi has failed",
    "xid",
)
_RUNTIME_MARKS = (
    "nvidia-container-cli",
    "nvidia-container-runtime",
    "unresolvable cdi devices",
    "could not select device driver",
    "no cuda-capable device",
    "cuda_error_no_device",
    "libnvidia",
    "libcuda",
)


@dataclasses.dataclass(frozen=True)
class PluginOnNode:
    """The device plugin as far as one node goes; `known` is False when none was detected."""

    known: bool
    pod: PluginPod | None
    namespace: str = ""
    container: str = ""
    selector: str = ""
    blocked: str = ""  # why its DaemonSet runs no pod there (an untolerated taint), if known
    fix: str = ""  # the toleration to add, with `blocked`


def kubelet(
    pod: Pod,
    node: Node | None,
    plugin: PluginOnNode,
    events: Sequence[Event],
    stuck: Sequence[str] = (),
) -> list[Diagnosis]:
    """Why a scheduled pod did not start: refused admission, no plugin (or one a stuck MIG
    change paused: `stuck` says why), a vanished resource."""
    found = _refusal(pod, events)
    asked = pod.asked()
    if not asked or pod.phase in ("Running", "Succeeded"):
        return found
    found += _stuck(pod, stuck) if stuck else _plugin(pod, plugin)
    if node is not None:
        found += _vanished(pod, node, asked)
    return found


def _refusal(pod: Pod, events: Sequence[Event]) -> list[Diagnosis]:
    if pod.reason != "UnexpectedAdmissionError" and not pod.reason.startswith("OutOf"):
        return []
    message = pod.message or next((e.message for e in events if e.reason == pod.reason), "")
    if SHARED_LIMIT in message:
        fix = (
            "request 1 shared GPU per container (a replica is a time slice, not more "
            "compute), or set failRequestsGreaterThanOne: false in the sharing config"
        )
    elif UNAVAILABLE in message:
        fix = (
            "the node's healthy devices shrank after the pod was scheduled (an unhealthy GPU "
            "or a plugin restart): delete the pod so it is placed again, and run "
            "`kubectl gpu doctor` for the node's GPU health"
        )
    else:
        fix = "the resource left the node's allocatable after scheduling: delete the pod"
    return [
        Diagnosis(
            "kubelet",
            "error",
            pod.ref,
            f"kubelet on {pod.node} refused the pod at admission ({pod.reason})",
            (f"{pod.reason}: {message}",),
            fix,
        )
    ]


def _plugin(pod: Pod, plugin: PluginOnNode) -> list[Diagnosis]:
    if not plugin.known:
        return []
    if plugin.pod is None and plugin.blocked:
        return [
            Diagnosis(
                "kubelet",
                "error",
                f"node/{pod.node}",
                f"no device plugin pod runs on node {pod.node}: {plugin.blocked}",
                (f"no pod matching {plugin.selector} in {plugin.namespace} on {pod.node}",),
                plugin.fix,
            )
        ]
    if plugin.pod is None:
        return [
            Diagnosis(
                "kubelet",
                "error",
                f"node/{pod.node}",
                f"no device plugin pod runs on node {pod.node}: nothing allocates its GPUs",
                (f"no pod matching {plugin.selector} in {plugin.namespace} on {pod.node}",),
                "check the plugin DaemonSet's nodeSelector/tolerations and the node's labels "
                f"(kubectl get ds -n {plugin.namespace})",
            )
        ]
    if plugin.pod.running:
        return []
    state = plugin.pod
    detail = f": {state.message}" if state.message else ""
    return [
        Diagnosis(
            "kubelet",
            "error",
            f"pod/{state.name}",
            f"the device plugin on node {pod.node} is {state.status} ({state.restarts} restarts)",
            (f"plugin pod {plugin.namespace}/{state.name}: {state.status}{detail}",),
            f"read why: kubectl logs -n {plugin.namespace} {state.name} -c {plugin.container} "
            "--previous; `kubectl gpu share show` checks the config it reads",
        )
    ]


def _stuck(pod: Pod, reasons: Sequence[str]) -> list[Diagnosis]:
    return [
        Diagnosis(
            "kubelet",
            "error",
            f"node/{pod.node}",
            f"a stuck MIG change took the device plugin off node {pod.node}: {reasons[0]}",
            tuple(reasons),
            f"kubectl gpu mig recover {pod.node}",
        )
    ]


def _vanished(pod: Pod, node: Node, asked: dict[str, int]) -> list[Diagnosis]:
    found = []
    for resource, amount in sorted(asked.items()):
        have = node.allocatable.get(resource, 0)
        if have >= amount:
            continue
        found.append(
            Diagnosis(
                "kubelet",
                "error",
                node.ref,
                f"{resource} fell to {have} on node {node.name} after the pod was placed",
                (
                    f"capacity {node.capacity.get(resource, 0)}, allocatable {have}; "
                    f"the pod asks {amount}",
                ),
                "the device plugin stopped advertising it (restart, crash or unhealthy GPUs): "
                "fix the plugin, then delete the pod so it is placed again",
            )
        )
    return found


def runtime(pod: Pod, events: Sequence[Event]) -> list[Diagnosis]:
    """GPU errors in events and container messages, and hand-set NVIDIA_VISIBLE_DEVICES."""
    found = _env(pod)
    texts = [(f"event {e.reason}", e.message) for e in events if e.type == "Warning"]
    for state in pod.states:
        texts += [(f"container {state.name}", m) for m in (state.message, state.last_message) if m]
    seen: set[tuple[Layer, str]] = set()
    for where, text in texts:
        layer = classify(text)
        if layer is None or (layer, where) in seen:
            continue
        seen.add((layer, where))
        found.append(_gpu_error(pod, layer, where, text))
    return found


def classify(text: str) -> Layer | None:
    """Which layer a message about GPUs points at: the driver, the runtime, or neither."""
    lower = text.lower()
    if any(mark in lower for mark in _DRIVER_MARKS):
        return "driver"
    if any(mark in lower for mark in _RUNTIME_MARKS):
        return "runtime"
    return None


def _gpu_error(pod: Pod, layer: Layer, where: str, text: str) -> Diagnosis:
    if layer == "driver":
        message = f"the NVIDIA driver on node {pod.node or '?'} fails the container"
        fix = (
            "a driver/library mismatch follows a driver upgrade without reboot: reboot or "
            "restart the driver on the node; check `nvidia-smi` and dmesg for Xid errors"
        )
    else:
        message = "the container runtime did not give the container its GPU"
        fix = (
            "check the NVIDIA container toolkit on the node (runtimeClassName, containerd "
            "config, CDI specs) and that the image's CUDA needs no newer driver"
        )
    return Diagnosis(layer, "error", pod.ref, message, (f"{where}: {text[:500]}",), fix)


def _env(pod: Pod) -> list[Diagnosis]:
    found = []
    for container in pod.containers:
        value = container.env.get(VISIBLE_DEVICES)
        if value is None:
            continue
        asks = any(container.asked(r) for r in container.gpu_resources)
        if asks and value.lower() in ("", "void", "none"):
            found.append(_env_finding(pod, container.name, value, "may hide its GPUs"))
        elif not asks and value.lower() not in ("", "void", "none"):
            found.append(
                _env_finding(pod, container.name, value, "sees GPUs it was never allocated")
            )
    return found


def _env_finding(pod: Pod, container: str, value: str, what: str) -> Diagnosis:
    return Diagnosis(
        "runtime",
        "warning",
        pod.ref,
        f"container {container} sets {VISIBLE_DEVICES}={value} by hand and {what}",
        (f"spec env {VISIBLE_DEVICES}={value!r}",),
        f"remove {VISIBLE_DEVICES} from the spec: the device plugin sets it for the "
        "devices it allocates",
    )
