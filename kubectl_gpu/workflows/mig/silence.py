"""Why a node did not (or will not) answer a MIG request, and what to run next.

Owns looking at what should act on the node: our agent's pod (none on the node, not running,
or running without taking up the request) or the GPU Operator's MIG manager pod. Once a wait is
over, the answer is one sentence for the node's REASON cell; before anything is written,
`will_not_act` says when no such pod is there to act at all (from one LIST of the actuator's
pods for all nodes, `actuator_pods`). Must not wait or write.
"""

from __future__ import annotations

from typing import Any

from kubectl_gpu import cluster, keys
from kubectl_gpu.errors import ClusterError
from kubectl_gpu.mig.actuators import Actuator

Json = dict[str, Any]
AGENT_SELECTOR = "app.kubernetes.io/name=kubectl-gpu-agent"
MIG_MANAGER_SELECTOR = "app=nvidia-mig-manager"


def reason(api: cluster.Api, node: str, actuator: Actuator, last_seen: str, waited: float) -> str:
    """`timed out after …` plus who did not answer on `node` and the command to look further."""
    head = f"timed out after {waited:g}s; last seen: {last_seen or 'no answer'}"
    try:
        return f"{head}; {_who(api, node, actuator, last_seen)}"
    except ClusterError as e:  # e.g. no right to list pods: the timeout still stands
        return f"{head} (the actuator's pod could not be read: {e.message})"


def actuator_pods(api: cluster.Api, actuator: Actuator) -> dict[str, list[Json]] | None:
    """Every pod of `actuator` (its DaemonSet's label), by node: one LIST however many nodes a
    change asks (a LIST per node was 1,000 requests before a 1,000-node drain began); None
    when pods may not be read."""
    selector = MIG_MANAGER_SELECTOR if actuator is Actuator.OPERATOR else AGENT_SELECTOR
    found: dict[str, list[Json]] = {}
    try:
        for pod in api.list(cluster.path("pods"), label_selector=selector):
            found.setdefault(str((pod.get("spec") or {}).get("nodeName") or ""), []).append(pod)
    except ClusterError:
        return None
    return found


def will_not_act(
    node: str, actuator: Actuator, pods: dict[str, list[Json]] | None, *, running: bool
) -> str:
    """Why nothing will act on a MIG request on `node` ("" when its actuator's pod is there,
    and Running when `running`: a drain must not empty a node nobody will change), from
    `actuator_pods`. A pod list the user may not read (None) is no reason to refuse."""
    operator = actuator is Actuator.OPERATOR
    who = "GPU Operator MIG manager" if operator else "kubectl-gpu agent"
    if pods is None:
        return ""
    on_node = pods.get(node, [])
    if not on_node:
        fix = (
            f"is migManager enabled in the ClusterPolicy, and {keys.DEPLOY_MIG_MANAGER_LABEL}="
            "true on the node?"
            if operator
            else "run `kubectl gpu install`, then `kubectl gpu status`"
        )
        return f"no {who} pod runs on {node}, so nothing would act on the change ({fix})"
    if running and not any(_running(p) for p in on_node):
        return f"{_pod_says(on_node[0], f'the {who}')}; nothing would act on the change yet"
    return ""


def _who(api: cluster.Api, node: str, actuator: Actuator, last_seen: str) -> str:
    if actuator is Actuator.OPERATOR:
        pods = _pods_on(api, node, MIG_MANAGER_SELECTOR)
        if not pods:
            return (
                f"no GPU Operator MIG manager pod runs on {node} (is migManager enabled, and "
                f"{keys.DEPLOY_MIG_MANAGER_LABEL}=true on the node?)"
            )
        return _pod_says(pods[0], "the MIG manager")
    pods = _pods_on(api, node, AGENT_SELECTOR)
    if not pods:
        return (
            f"no kubectl-gpu agent pod runs on {node}: run `kubectl gpu status` "
            "(and `kubectl gpu install` if it is not installed)"
        )
    if last_seen in ("", "waiting") and _running(pods[0]):
        meta = pods[0]["metadata"]
        return (
            f"agent pod {meta['name']} runs but never took up the request: "
            f"kubectl logs -n {meta['namespace']} {meta['name']}"
        )
    return _pod_says(pods[0], "the agent")


def _pods_on(api: cluster.Api, node: str, selector: str) -> list[Json]:
    return list(
        api.list(
            cluster.path("pods"), label_selector=selector, field_selector=f"spec.nodeName={node}"
        )
    )


def _running(pod: Json) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


def _pod_says(pod: Json, who: str) -> str:
    meta, status = pod["metadata"], pod.get("status") or {}
    waiting = [
        (c.get("state") or {}).get("waiting", {}).get("reason")
        for c in status.get("containerStatuses") or []
    ]
    state = next((w for w in waiting if w), status.get("phase", "unknown"))
    return (
        f"{who}'s pod {meta['name']} is {state}: kubectl logs -n {meta['namespace']} "
        f"{meta['name']}; kubectl gpu mig status shows the node's state"
    )
