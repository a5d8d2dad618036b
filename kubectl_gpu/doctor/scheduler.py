"""Layer 2, scheduler placement: why a pending GPU pod has no node, checked node by node.

Owns the verdicts for an unscheduled pod: untolerated GPU taints on nodes with free GPUs, node
selectors/affinity (typically `nvidia.com/gpu.product`) that no node with free GPUs meets (with
the free products listed, and the `-SHARED` product suffix sharing adds), too few free devices
of the requested resource name (including `nvidia.com/gpu` renamed to `nvidia.com/gpu.shared`
and MIG resources under another MIG strategy), and preemption notes. The FailedScheduling event
is kept as evidence. Pure: standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kubectl_gpu import keys
from kubectl_gpu.doctor import placement, taints
from kubectl_gpu.doctor.facts import Event, Node, Pod
from kubectl_gpu.doctor.model import Diagnosis
from kubectl_gpu.sharing.rollout.status import NodeStatus

GPU = "nvidia.com/gpu"
SHARED = ".shared"
PRODUCT = keys.GPU_PRODUCT_LABEL
MIG_STRATEGY = keys.MIG_STRATEGY_LABEL
MIG_PREFIX = "nvidia.com/mig-"
NO_VICTIMS = "No preemption victims found"


def check(
    pod: Pod,
    nodes: Sequence[Node],
    events: Sequence[Event],
    survey: Sequence[NodeStatus] = (),
    stuck: Mapping[str, Sequence[str]] | None = None,
) -> list[Diagnosis]:
    """Every reason the scheduler cannot place `pod` that doctor can name, most specific
    first (`survey`: the device plugin on each GPU node, when it is known; `stuck`: why a
    node's MIG change is stuck, by node); `unexplained` adds the event's word when no layer
    named one."""
    asked = pod.asked()
    latest = next((e for e in reversed(events) if e.reason == "FailedScheduling"), None)
    evidence = (f"FailedScheduling: {latest.message}",) if latest else ()
    gpu_nodes = [n for n in nodes if n.is_gpu_node]
    roomy = [n for n in gpu_nodes if _has_room(n, asked)] if asked else []
    found = [
        *taints.blocking(pod, gpu_nodes, roomy, asked),
        *_selectors(pod, gpu_nodes, roomy, asked),
    ]
    if asked and not roomy:
        down = _plugins_down(gpu_nodes, survey, asked, stuck or {})
        found += down
        # A node whose plugin is down is neither full nor missing the resource: say only that.
        silent = {d.object.removeprefix("node/") for d in down}
        found += _capacity(pod, [n for n in nodes if n.name not in silent], asked, bool(down))
    found += taints.in_event(pod, gpu_nodes, latest, found)
    found = [_with(d, evidence) for d in found]
    return found + _preemption(pod, latest)


def unexplained(pod: Pod, events: Sequence[Event], found: Sequence[Diagnosis]) -> list[Diagnosis]:
    """The scheduler's own word where no layer (this one, or DRA's for the pod's claims) has
    named an error: one finding per cause, so a pod whose claim no device satisfies is not
    also told that the scheduler finds no node."""
    latest = next((e for e in reversed(events) if e.reason == "FailedScheduling"), None)
    if latest is None or any(d.severity == "error" for d in found):
        return []
    return [
        Diagnosis(
            "scheduler",
            "error",
            pod.ref,
            "the scheduler finds no node for the pod (not because of its GPUs)",
            (f"FailedScheduling: {latest.message}",),
            "read the reasons in the event; `kubectl describe pod` lists them per node",
        )
    ]


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


def _selectors(
    pod: Pod, gpu_nodes: Sequence[Node], roomy: Sequence[Node], asked: dict[str, int]
) -> list[Diagnosis]:
    """No node with free GPUs meets the selector/affinity: say which products are free."""
    keys = placement.selector_keys(pod)
    if not roomy or not keys or any(not placement.unmet(pod, n) for n in roomy):
        return []
    selected = [n for n in gpu_nodes if not placement.unmet(pod, n)]
    # a selected node that advertises none of a resource (an all-MIG node asked for whole
    # GPUs) is not full: waiting frees nothing there
    matching = [n for n in selected if all(n.allocatable.get(r, 0) for r in asked)]
    wanted = _wanted(pod)
    products = sorted({n.labels.get(PRODUCT, "<unlabelled>") for n in roomy})
    evidence = [
        f"free: node {n.name} ({n.labels.get(PRODUCT, 'no product label')}): "
        f"{taints.free(n, asked)}; unmet {'; '.join(placement.unmet(pod, n))}"
        for n in roomy
    ]
    evidence += [f"matching but full: node {n.name}: {taints.free(n, asked)}" for n in matching]
    evidence += [
        f"matching but advertises no {', '.join(sorted(asked))}: node {n.name} offers "
        f"{', '.join(sorted(r for r, v in n.allocatable.items() if v)) or 'nothing'}"
        for n in selected
        if n not in matching
    ]
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


def _plugins_down(
    gpu_nodes: Sequence[Node],
    survey: Sequence[NodeStatus],
    asked: dict[str, int],
    stuck: Mapping[str, Sequence[str]],
) -> list[Diagnosis]:
    """GPU nodes that would hold the pod's resources but whose device plugin is not running."""
    rows = {row.node: row for row in survey if row.plugin_down}
    found = []
    for node in gpu_nodes:
        row = rows.get(node.name)
        never = not any(node.capacity.values())  # the plugin never started here
        if row is not None and (
            never or any(node.capacity.get(r, 0) >= n for r, n in asked.items())
        ):
            found.append(_plugin_down(node, row, asked, stuck.get(node.name, ())))
    return found


def _plugin_down(
    node: Node, row: NodeStatus, asked: dict[str, int], stuck: Sequence[str]
) -> Diagnosis:
    had = ", ".join(f"{node.allocatable.get(r, 0)} of {node.capacity.get(r, 0)} {r}" for r in asked)
    why = f": {row.config_error}" if row.config_error else ""
    plugin = f"pod {row.plugin_pod}" if row.plugin_pod else "no plugin pod"
    fix = (
        f"correct key {row.key} of the plugin's ConfigMap (`kubectl gpu validate` checks it)"
        if row.config_error
        else f"`kubectl gpu doctor` (no pod) shows why the plugin on {node.name} fails"
    )
    if stuck:  # the plugin is paused for a MIG change that is not going on
        why, fix = (
            f" (a stuck MIG change paused it: {stuck[0]})",
            f"kubectl gpu mig recover {node.name}",
        )
    return Diagnosis(
        "kubelet",
        "error",
        node.ref,
        f"the device plugin on node {node.name} is {row.plugin_status}{why}",
        (f"node {node.name} advertises {had}; {plugin}: {row.plugin_status}",),
        fix,
    )


def _capacity(
    pod: Pod, nodes: Sequence[Node], asked: dict[str, int], plugins_down: bool = False
) -> list[Diagnosis]:
    found = []
    for resource, amount in sorted(asked.items()):
        if any(n.free(resource) >= amount for n in nodes):
            continue
        advertised = [n for n in nodes if n.allocatable.get(resource, 0) > 0]
        if not advertised:
            if not plugins_down:
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
                tuple(f"node {n.name}: {taints.free(n, {resource: amount})}" for n in advertised),
                "wait for GPU pods to finish, free GPUs, add GPU nodes, or share GPUs "
                "(kubectl gpu share --replicas N)",
            )
        )
    return found


def _not_advertised(pod: Pod, nodes: Sequence[Node], resource: str) -> Diagnosis:
    renamed = [n.name for n in nodes if n.allocatable.get(resource + SHARED, 0) > 0]
    single = [n for n in nodes if n.labels.get(MIG_STRATEGY) == "single" and _mig_on(n)]
    mig_off = [n.name for n in nodes if _mig_off(n)]
    off_single = any(n.labels.get(MIG_STRATEGY) == "single" for n in nodes if _mig_off(n))
    mig_only = [n.name for n in nodes if any(r.startswith(MIG_PREFIX) for r in n.allocatable)]
    if renamed:
        why, fix = (
            f"sharing renamed it to {resource}{SHARED} on {', '.join(renamed)}",
            f"request {resource}{SHARED} (renameByDefault: true renames shared resources)",
        )
    elif resource.startswith(MIG_PREFIX) and single:
        why, fix = _mig_single(resource, single)
    elif resource.startswith(MIG_PREFIX) and mig_off:
        profile = resource[len(MIG_PREFIX) :]
        why, fix = (
            f"MIG is disabled on {', '.join(mig_off)} (MIG-capable GPUs, not partitioned)",
            f"partition a node into {profile} devices: kubectl gpu mig apply -f FILE -c CONFIG "
            f"--node {mig_off[0]}"
            + (f" (migStrategy single then names them {GPU})" if off_single else ""),
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


def _mig_on(node: Node) -> bool:
    """MIG devices advertised: a `-MIG-` product (strategy single) or mig-* resources."""
    product = node.labels.get(PRODUCT, "")
    return "-MIG-" in product or any(r.startswith(MIG_PREFIX) for r in node.capacity)


def _mig_off(node: Node) -> bool:
    return node.labels.get(keys.MIG_CAPABLE_LABEL) == "true" and not _mig_on(node)


def _mig_single(resource: str, single: Sequence[Node]) -> tuple[str, str]:
    """Strategy single names MIG devices nvidia.com/gpu; the product label tells the profile."""
    profile = resource[len(MIG_PREFIX) :]
    names = ", ".join(n.name for n in single)
    why = f"MIG strategy single on {names} advertises MIG devices as {GPU}"
    exact = sorted(
        {p for n in single if (p := n.labels.get(PRODUCT, "")).endswith(f"-MIG-{profile}")}
    )
    if exact:
        return why, f"request {GPU} with nodeSelector {PRODUCT}={exact[0]}"
    return why, (
        f"no node offers {profile} devices: partition one into them (kubectl gpu mig apply), "
        "or set migStrategy mixed to get mig-* names"
    )


def _mig_names(nodes: Sequence[Node]) -> str:
    names = sorted({r for n in nodes for r in n.allocatable if r.startswith(MIG_PREFIX)})
    return ", ".join(names[:3])


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
