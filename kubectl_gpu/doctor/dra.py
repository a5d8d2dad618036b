"""The DRA layer, between the scheduler and the kubelet: why a pod's ResourceClaims are not
allocated, or not prepared on its node.

Rules, in the order of investigation: a claim still waiting for an allocation (each DeviceClass
and request selector is evaluated, clause by clause, against the published devices, and the
clause no device satisfies is named with the values the devices do have); no ResourceSlice
from gpu.nvidia.com on the pod's node (the driver's kubelet plugin is not running there);
`NodePrepareResources` errors in the pod's events, with what is wrong in the config that caused
them; a sharing strategy whose driver feature gate is off; and a pod asking for both a claim
and `nvidia.com/gpu` where no node is served by both planes. CEL is evaluated through the
`evaluate` callable the workflow passes in (kubectl_gpu.cel): this module never imports it.
Pure: standard library and the sibling domain packages.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubectl_gpu.doctor.drafacts import ClaimFacts, ClassFacts, Device, Wanted
from kubectl_gpu.doctor.facts import Event, Node, Pod
from kubectl_gpu.doctor.model import Diagnosis
from kubectl_gpu.dra import selectors, sharing

DRIVER = sharing.DRIVER
GPU_RESOURCE = "nvidia.com/gpu"
MAX_VALUES = 6
PREPARE_REASONS = ("FailedPrepareDynamicResources",)
Evaluate = Callable[[str, Mapping[str, Any]], bool]
CEL_EXTRA = "pip install 'kubectl-gpu[dra]' (cel-python)"


class SelectorError(Exception):
    """A selector that cannot be compiled or evaluated on a device (CEL's own message)."""


@dataclasses.dataclass(frozen=True)
class DraCase:
    """The DRA facts about one pod: its claims, the classes, the published devices, the
    driver's feature gates (None: unknown) and the CEL evaluator to use."""

    claims: tuple[ClaimFacts, ...]
    classes: Mapping[str, ClassFacts]
    devices: tuple[Device, ...]
    gates: Mapping[str, bool] | None
    evaluate: Evaluate | None  # None: no CEL evaluator installed, selectors not evaluated
    taken: Mapping[tuple[str, str, str], str] = dataclasses.field(default_factory=dict)
    cel_install: str = CEL_EXTRA  # how to install cel-python where kubectl gpu runs


def check(
    pod: Pod, nodes: Sequence[Node], events: Sequence[Event], case: DraCase
) -> list[Diagnosis]:
    """Every DRA-layer problem of `pod`."""
    found: list[Diagnosis] = []
    for claim in case.claims:
        if not claim.allocated:
            found += _pending(pod, claim, case)
    found += _extended_pending(pod, case)
    found += _driver_on_node(pod, case)
    found += _prepare_errors(pod, events, case)
    found += _gates(case)
    found += _planes(pod, nodes, case)
    return found


# --- a claim waiting for an allocation -----------------------------------------------------------


def _pending(pod: Pod, claim: ClaimFacts, case: DraCase) -> list[Diagnosis]:
    if case.evaluate is None:
        return [
            Diagnosis(
                "dra",
                "warning",
                f"resourceclaim/{claim.name}",
                f"claim {claim.name} is waiting for an allocation; its selectors were not "
                "evaluated: no CEL evaluator is installed",
                (),
                f"{case.cel_install} and run doctor again",
            )
        ]
    devices = [d for d in case.devices if not pod.node or d.node == pod.node]
    found = []
    for alternatives in claim.requests:
        problems = [_unsatisfied(alt, devices, case, pod) for alt in alternatives]
        if any(p is None for p in problems):
            continue  # one alternative fits: the scheduler's problem lies elsewhere
        first = problems[0]
        assert first is not None
        message, evidence, fix = first
        if len(alternatives) > 1:
            message += f" (and none of its other {len(alternatives) - 1} alternatives fits)"
        found.append(
            Diagnosis("dra", "error", f"resourceclaim/{claim.name}", message, evidence, fix)
        )
    return found


def _extended_pending(pod: Pod, case: DraCase) -> list[Diagnosis]:
    """A pending pod's `nvidia.com/gpu` that a DeviceClass serves through DRA (KEP-5004): the
    scheduler would make a claim for it, so the class's selectors must find free devices."""
    count = pod.asked().get(GPU_RESOURCE, 0)
    mapped = [c for c in case.classes.values() if c.extended_resource == GPU_RESOURCE]
    if pod.node or case.claims or not count or not mapped or case.evaluate is None:
        return []
    wanted = Wanted(GPU_RESOURCE, mapped[0].name, (), count)
    problem = _unsatisfied(wanted, list(case.devices), case, pod)
    if problem is None:
        return []
    message, evidence, fix = problem
    via = f" (DeviceClass {mapped[0].name} serves it through DRA)"
    return [Diagnosis("dra", "error", pod.ref, message.replace(
        f"request {GPU_RESOURCE}", f"{GPU_RESOURCE}{via}", 1), evidence, fix)]  # fmt: skip


def _unsatisfied(
    wanted: Wanted, devices: list[Device], case: DraCase, pod: Pod
) -> tuple[str, tuple[str, ...], str] | None:
    where = f" on node {pod.node}" if pod.node else ""
    ask = f"request {wanted.name}"
    cls = case.classes.get(wanted.device_class)
    if cls is None:
        return (
            f"{ask} names DeviceClass {wanted.device_class}, which does not exist",
            (),
            "create the class (the NVIDIA chart installs gpu.nvidia.com and mig.nvidia.com) "
            "or fix deviceClassName",
        )
    if not any(d.driver == DRIVER for d in devices):
        return (
            f"{ask} cannot be allocated: no ResourceSlice from {DRIVER} is published{where}",
            (),
            "install or start the NVIDIA DRA driver (its kubelet plugin publishes the slices)",
        )
    clauses = [(f"DeviceClass {cls.name}", c) for s in cls.selectors for c in selectors.clauses(s)]
    clauses += [(ask, c) for s in wanted.selectors for c in selectors.clauses(s)]
    assert case.evaluate is not None  # _pending checked
    search = _Search(ask, wanted, devices, case.evaluate, where, case.taken)
    return _first_unmet(search, clauses)


@dataclasses.dataclass(frozen=True)
class _Search:
    """One request's search through the published devices."""

    ask: str
    wanted: Wanted
    devices: list[Device]
    evaluate: Evaluate
    where: str
    taken: Mapping[tuple[str, str, str], str]


def _first_unmet(
    search: _Search, clauses: list[tuple[str, str]]
) -> tuple[str, tuple[str, ...], str] | None:
    devices, evaluate = search.devices, search.evaluate
    passing = set(range(len(devices)))
    for origin, clause in clauses:
        matched, errors = _matching(clause, devices, evaluate)
        if not matched:
            return _unmet(search, origin, clause, errors)
        passing &= matched
    if len(passing) >= search.wanted.count:
        return _taken(search, passing)
    counts = ", ".join(
        f"{len(_matching(c, devices, evaluate)[0])} satisfy `{c}`" for _, c in clauses
    )
    return (
        f"{search.ask} needs {search.wanted.count} device(s) satisfying every selector "
        f"together, and {len(passing)} do{search.where}",
        (f"of {len(devices)} published devices: {counts}",),
        "relax a selector, ask for fewer devices, or add GPUs that satisfy all of them",
    )


def _taken(search: _Search, passing: set[int]) -> tuple[str, tuple[str, ...], str] | None:
    """Enough devices match, but other claims hold them."""
    matching = [search.devices[i] for i in sorted(passing)]
    held = [d for d in matching if d.key in search.taken]
    if len(matching) - len(held) >= search.wanted.count:
        return None
    holders = [f"{d.name} on {d.node}: {search.taken[d.key]}" for d in held]
    return (
        f"{search.ask} cannot be allocated: {len(matching)} device(s) satisfy its selectors"
        f"{search.where}, and other claims hold {len(held)} of them",
        tuple(holders[:MAX_VALUES]),
        "wait for those claims to be released, or share the GPUs (a GpuConfig with "
        "TimeSlicing or MPS, or consumable capacity)",
    )


def _matching(clause: str, devices: list[Device], evaluate: Evaluate) -> tuple[set[int], list[str]]:
    matched, errors = set(), []
    for index, device in enumerate(devices):
        try:
            if evaluate(clause, device.view):
                matched.add(index)
        except SelectorError as e:
            errors.append(f"{device.name}: {e}")
    return matched, errors


def _unmet(
    search: _Search, origin: str, clause: str, errors: list[str]
) -> tuple[str, tuple[str, ...], str]:
    ask, devices, where = search.ask, search.devices, search.where
    read = selectors.attributes(clause)
    names = [name for _, _, name in read if name] or ["driver" for k, _, _ in read if k]
    subject = ", ".join(dict.fromkeys(names)) or "the expression"
    evidence = [_values(field, devices) for field in read]
    if errors:
        evidence.append(f"CEL runtime error on {len(errors)} device(s), e.g. {errors[0]}")
    return (
        f"{ask} cannot be allocated: no published device{where} satisfies {origin}'s "
        f"selector `{clause}` ({subject})",
        tuple(evidence),
        f"fix the selector in {origin}, or add a device whose {subject} matches",
    )


def _values(field: tuple[str, str, str], devices: list[Device]) -> str:
    kind, domain, name = field
    if kind == "driver":
        seen = [str(d.view.get("driver")) for d in devices]
        label = "device.driver"
    else:
        table = [d.view.get(kind, {}).get(domain, {}) for d in devices]
        seen = [str(t.get(name, "<absent>")) for t in table]
        label = f"{domain}/{name}"
    distinct = sorted(set(seen))
    shown = ", ".join(f"'{v}'" for v in distinct[:MAX_VALUES])
    more = f" and {len(distinct) - MAX_VALUES} more" if len(distinct) > MAX_VALUES else ""
    return f"{label} on the {len(devices)} published device(s): {shown}{more}"


# --- the node side -------------------------------------------------------------------------------


def _driver_on_node(pod: Pod, case: DraCase) -> list[Diagnosis]:
    if not pod.node or not case.claims:
        return []
    if any(d.node == pod.node and d.driver == DRIVER for d in case.devices):
        return []
    return [
        Diagnosis(
            "dra",
            "error",
            f"node/{pod.node}",
            f"no ResourceSlice from {DRIVER} on node {pod.node}: the NVIDIA DRA driver's "
            "kubelet plugin is not running there, so its claims cannot be prepared",
            (),
            "check the driver's kubelet-plugin pod on that node (kubectl get pods -A -o wide "
            f"--field-selector spec.nodeName={pod.node})",
        )
    ]


def _prepare_errors(pod: Pod, events: Sequence[Event], case: DraCase) -> list[Diagnosis]:
    failed = [e for e in events if e.reason in PREPARE_REASONS or "PrepareResources" in e.message]
    if not failed:
        return []
    causes = tuple(_config_problems(case))
    latest = failed[-1]
    if "is not registered" in latest.message:  # kubelet found no plugin socket for the driver
        causes = (f"event {latest.reason}: {latest.message}", *causes)
        return [
            Diagnosis(
                "dra",
                "error",
                pod.ref,
                "the DRA driver's kubelet plugin is not registered on the pod's node, so its "
                "claims cannot be prepared",
                causes,
                "check the driver's kubelet-plugin pod on that node (it registers through "
                "/var/lib/kubelet/plugins_registry)",
            )
        ]
    return [
        Diagnosis(
            "dra",
            "error",
            pod.ref,
            f"the DRA driver could not prepare the pod's devices: {latest.message}",
            causes or (f"event {latest.reason} (x{latest.count})",),
            "fix the claim's config (kubectl gpu validate -f claim.yaml names every problem), "
            "then recreate the pod",
        )
    ]


def _config_problems(case: DraCase) -> list[str]:
    found = []
    for owner, parameters in _nvidia_configs(case):
        for finding in sharing.check(parameters, ()):
            if finding.code != "dra.feature-gate" or _gate_off(case, parameters):
                found.append(f"{owner} config: {finding.message}")
    return found


def _gates(case: DraCase) -> list[Diagnosis]:
    if case.gates is None:
        return []
    found = []
    for owner, parameters in _nvidia_configs(case):
        strategy = sharing.strategy_of(parameters)
        gate = sharing.GATES.get(strategy or "")
        if gate and not case.gates.get(gate, False):
            found.append(
                Diagnosis(
                    "dra",
                    "error",
                    owner,
                    f"{owner} asks for {strategy} sharing, but the NVIDIA DRA driver runs "
                    f"with its {gate} feature gate off: NodePrepareResources will fail",
                    (f"driver feature gates: {_gate_list(case.gates)}",),
                    f"helm upgrade the driver with --set featureGates.{gate}=true",
                )
            )
    return found


def _gate_off(case: DraCase, parameters: Any) -> bool:
    gate = sharing.GATES.get(sharing.strategy_of(parameters) or "")
    return case.gates is None or not case.gates.get(gate or "", False)


def _gate_list(gates: Mapping[str, bool]) -> str:
    return ", ".join(f"{k}={str(v).lower()}" for k, v in sorted(gates.items())) or "(none set)"


def _nvidia_configs(case: DraCase) -> list[tuple[str, Any]]:
    """(owner, parameters) of every NVIDIA config the pod's claims get: class, then claim."""
    found = []
    for claim in case.claims:
        names = {w.device_class for alternatives in claim.requests for w in alternatives}
        for name in sorted(names):
            cls = case.classes.get(name)
            configs = cls.configs if cls else ()
            found += [(f"deviceclass/{name}", p) for d, p in configs if d == DRIVER]
        found += [(f"resourceclaim/{claim.name}", p) for d, p in claim.configs if d == DRIVER]
    unique = {(owner, repr(parameters)): (owner, parameters) for owner, parameters in found}
    return list(unique.values())


# --- both planes ---------------------------------------------------------------------------------


def _planes(pod: Pod, nodes: Sequence[Node], case: DraCase) -> list[Diagnosis]:
    if not case.claims or GPU_RESOURCE not in pod.asked():
        return []
    extended = any(c.extended_resource == GPU_RESOURCE for c in case.classes.values())
    dra_nodes = {d.node for d in case.devices if d.driver == DRIVER and d.node}
    candidates = [n for n in nodes if not pod.node or n.name == pod.node]
    plugin = {n.name for n in candidates if n.allocatable.get(GPU_RESOURCE, 0) > 0}
    gpu_served = plugin | (dra_nodes if extended else set())
    both = sorted(gpu_served & dra_nodes & {n.name for n in candidates})
    if both:
        return []
    only_plugin = sorted(plugin - dra_nodes)
    only_dra = sorted(dra_nodes & {n.name for n in candidates} - plugin)
    return [
        Diagnosis(
            "dra",
            "error",
            pod.ref,
            f"the pod asks for {GPU_RESOURCE} and for ResourceClaims, but no "
            f"{'node' if not pod.node else 'its node'} is served by both planes",
            (
                f"device plugin only: {', '.join(only_plugin) or 'none'}",
                f"DRA only: {', '.join(only_dra) or 'none'}"
                + ("" if extended else f" (no DeviceClass maps {GPU_RESOURCE} to DRA)"),
            ),
            f"ask for GPUs one way: replace {GPU_RESOURCE} with a claim, or the claim with "
            f"{GPU_RESOURCE}",
        )
    ]
