"""Layer 2, scheduler placement: why a pending GPU pod has no node, checked node by node.

Owns the verdicts for an unscheduled pod: untolerated GPU taints on nodes with free GPUs, node
selectors/affinity (typically `nvidia.com/gpu.product`) that no node with free GPUs meets (with
the free products listed, and the `-SHARED` product suffix sharing adds), too few free devices
of the requested resource name (including `nvidia.com/gpu` renamed to `nvidia.com/gpu.shared`
and MIG resources under another MIG strategy), and preemption notes. The FailedScheduling event
is kept as evidence. Pure: standard library only.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubectl_gpu import keys
from kubectl_gpu.doctor import placement
from kubectl_gpu.doctor.facts import Event, Node, Pod, Taint
from kubectl_gpu.doctor.model import Diagnosis

GPU = "nvidia.com/gpu"
SHARED = ".shared"
PRODUCT = keys.GPU_PRODUCT_LABEL
MIG_STRATEGY = keys.MIG_STRATEGY_LABEL
MIG_PREFIX = "nvidia.com/mig-"
NO_VICTIMS = "No preemption victims found"


def check(pod: Pod, nodes: Sequence[Node], events: Sequence[Event]) -> list[Diagnosis]:
    """Every reason the scheduler cannot place `pod`, most specific first."""
    asked = pod.asked()
    latest = next((e for e in reversed(events) if e.reason == "FailedScheduling"), None)
    evidence = (f"FailedScheduling: {latest.message}",) if latest else ()
    gpu_nodes = [n for n in nodes if n.is_gpu_node]
    roomy = [n for n in gpu_nodes if _has_room(n, asked)] if asked else []
    found = [*_taints(pod, gpu_nodes, roomy, asked), *_selectors(pod, gpu_nodes, roomy, asked)]
    if asked and not roomy:
        found += _capacity(pod, nodes, asked)
    found = [_with(d, evidence) for d in found]
    found += _preemption(pod, latest)
    if latest is not None and not any(d.severity == "error" for d in found):
        found.append(
            Diagnosis(
                "scheduler",
                "error",
                pod.ref,
                "the scheduler finds no node for the pod (not because of its GPUs)",
                evidence,
                "read the reasons in the event; `kubectl describe pod` lists them per node",
            )
        )
    return found


def _has_room(node: Node, asked: dict[str, int]) -> bool:
    return not node.unschedulable and all(node.free(r) >= n for r, n in asked.items())


def _with(diagnosis: Diagnosis, evidence: tuple[str, ...]) -> Diagnosis:
    return Diagnosis(
        diagnosis.layer,
        diagnosis.severity,
        diagnosis.object,
        diagnosis.message,
        (*diagnosis.evidence, *evidence),
        diagnosis.fix,
    )


def _taints(
    pod: Pod, gpu_nodes: Sequence[Node], roomy: Sequence[Node], asked: dict[str, int]
) -> list[Diagnosis]:
    """Blocking taints not tolerated; errors where GPUs are free, warnings elsewhere."""
    pool = roomy or [n for n in gpu_nodes if any(n.allocatable.get(r) for r in asked)]
    by_taint: dict[Taint, list[Node]] = {}
    for node in pool:
        for taint in placement.untolerated(pod, node):
            by_taint.setdefault(taint, []).append(node)
    found = []
    for taint, blocked in sorted(by_taint.items(), key=lambda item: str(item[0])):
        names = ", ".join(n.name for n in blocked)
        free = "free GPUs" if roomy else "GPUs (none free now)"
        found.append(
            Diagnosis(
                "scheduler",
                "error" if roomy else "warning",
                pod.ref,
                f"untolerated taint {taint} on {len(blocked)} node(s) with {free}: {names}",
                tuple(f"node {n.name}: taint {taint}; free {_free(n, asked)}" for n in blocked),
                "add to the pod spec: tolerations: [{key: "
                f"{taint.key}, operator: Exists, effect: {taint.effect}}}]",
            )
        )
    return found


def _selectors(
    pod: Pod, gpu_nodes: Sequence[Node], roomy: Sequence[Node], asked: dict[str, int]
) -> list[Diagnosis]:
    """No node with free GPUs meets the selector/affinity: say which products are free."""
    keys = placement.selector_keys(pod)
    if not roomy or not keys or any(not placement.unmet(pod, n) for n in roomy):
        return []
    matching = [n for n in gpu_nodes if not placement.unmet(pod, n)]
    wanted = _wanted(pod)
    products = sorted({n.labels.get(PRODUCT, "<unlabelled>") for n in roomy})
    evidence = [
        f"free: node {n.name} ({n.labels.get(PRODUCT, 'no product label')}): "
        f"{_free(n, asked)}; unmet {'; '.join(placement.unmet(pod, n))}"
        for n in roomy
    ]
    evidence += [f"matching but full: node {n.name}: {_free(n, asked)}" for n in matching]
    return [
        Diagnosis(
            "scheduler",
            "error",
            pod.ref,
            f"no node with free GPUs matches the pod's {wanted}; free products: "
            + ", ".join(products),
            tuple(evidence),
            _selector_fix(wanted, products, matching),
        )
    ]


def _wanted(pod: Pod) -> str:
    parts = [f"{k}={v}" for k, v in sorted(pod.node_selector.items())]
    if pod.affinity_terms is not None:
        parts.append("required node affinity on " + ", ".join(placement.selector_keys(pod)))
    return "node selector " + ", ".join(parts)


def _selector_fix(wanted: str, products: Sequence[str], matching: Sequence[Node]) -> str:
    shared = [p for p in products if p.endswith("-SHARED") and p[: -len("-SHARED")] in wanted]
    if shared:
        return (
            f"sharing renamed the product label to {shared[0]} (GFD appends -SHARED when "
            "renameByDefault is false): select that value, or set renameByDefault: true"
        )
    wait = f"; {len(matching)} matching node(s) are full: wait or free one" if matching else ""
    return f"select one of the free products ({', '.join(products)}) if it will do{wait}"


def _capacity(pod: Pod, nodes: Sequence[Node], asked: dict[str, int]) -> list[Diagnosis]:
    found = []
    for resource, amount in sorted(asked.items()):
        if any(n.free(resource) >= amount for n in nodes):
            continue
        advertised = [n for n in nodes if n.allocatable.get(resource, 0) > 0]
        if not advertised:
            found.append(_not_advertised(pod, nodes, resource))
            continue
        largest = max(n.allocatable.get(resource, 0) for n in advertised)
        message = (
            f"no node has {amount} {resource} at all (the largest has {largest})"
            if largest < amount
            else f"no node has {amount} free {resource}: all are in use"
        )
        found.append(
            Diagnosis(
                "scheduler",
                "error",
                pod.ref,
                message,
                tuple(f"node {n.name}: {_free(n, {resource: amount})}" for n in advertised),
                "wait for GPU pods to finish, free GPUs, add GPU nodes, or share GPUs "
                "(kubectl gpu share --replicas N)",
            )
        )
    return found


def _not_advertised(pod: Pod, nodes: Sequence[Node], resource: str) -> Diagnosis:
    renamed = [n.name for n in nodes if n.allocatable.get(resource + SHARED, 0) > 0]
    single = [n.name for n in nodes if n.labels.get(MIG_STRATEGY) == "single"]
    mig_only = [n.name for n in nodes if any(r.startswith(MIG_PREFIX) for r in n.allocatable)]
    if renamed:
        why, fix = (
            f"sharing renamed it to {resource}{SHARED} on {', '.join(renamed)}",
            f"request {resource}{SHARED} (renameByDefault: true renames shared resources)",
        )
    elif resource.startswith(MIG_PREFIX) and single:
        profile = resource[len(MIG_PREFIX) :]
        why, fix = (
            f"MIG strategy single on {', '.join(single)} advertises MIG devices as {GPU}",
            f"request {GPU} and select {PRODUCT} ending in -MIG-{profile}, "
            "or switch those nodes to migStrategy mixed",
        )
    elif resource == GPU and mig_only:
        why, fix = (
            f"MIG strategy mixed on {', '.join(mig_only)} advertises only {MIG_PREFIX}* there",
            f"request a MIG resource such as {_mig_names(nodes)}, or disable MIG on a node",
        )
    elif silent := [n.name for n in nodes if n.is_gpu_node and not any(n.capacity.values())]:
        why, fix = (
            f"GPU node(s) {', '.join(silent)} advertise nothing: no device plugin runs there",
            "run `kubectl gpu doctor` (no pod) to see why the device plugin is not running",
        )
    else:
        why, fix = "no device plugin advertises it", "check the resource name and the plugin"
    return Diagnosis(
        "scheduler",
        "error",
        pod.ref,
        f"no node advertises {resource}: {why}",
        tuple(f"node {n.name}: allocatable {dict(n.allocatable)}" for n in nodes if n.is_gpu_node),
        fix,
    )


def _mig_names(nodes: Sequence[Node]) -> str:
    names = sorted({r for n in nodes for r in n.allocatable if r.startswith(MIG_PREFIX)})
    return ", ".join(names[:3])


def _free(node: Node, asked: dict[str, int]) -> str:
    return ", ".join(f"{node.free(r)}/{node.allocatable.get(r, 0)} {r} free" for r in sorted(asked))


def _preemption(pod: Pod, latest: Event | None) -> list[Diagnosis]:
    priority = f"priority {pod.priority}" if pod.priority is not None else "default priority"
    if pod.priority_class:
        priority += f" (class {pod.priority_class})"
    if pod.nominated_node:
        note = f"the pod ({priority}) is preempting pods on node {pod.nominated_node}"
    elif latest is not None and NO_VICTIMS in latest.message:
        fit = placement.parse_fit_error(latest.message)
        tail = fit.preemption if fit else NO_VICTIMS
        note = f"no lower-priority pods to evict for the pod ({priority}): {tail}"
    else:
        return []
    return [
        Diagnosis(
            "scheduler",
            "info",
            pod.ref,
            note,
            (),
            "a higher priorityClassName lets it evict lower-priority GPU pods",
        )
    ]
