"""What `kubectl gpu install` will do in this cluster, decided before it writes anything.

Owns the install's pre-flight (issue 17): from the cluster facts (server version, namespaces,
RuntimeClasses, ClusterPolicies, DaemonSets, nodes) and what the user asked, the options the
install really runs with and every problem that must stop it, all at once. The rules: never a
second device plugin (beside the GPU Operator the agent only, "operator mode"; beside NVIDIA's
Helm chart or a static plugin, bundle mode only with `--replace-plugin`, which names what it
replaces); the plugin's namespace must exist; Kubernetes >= 1.30 (the admission policy reads
the service-account token's node claim); a RuntimeClass that is asked for must exist, and one
for the NVIDIA runtime is found when none is named; every node with GPUs must carry a label
our DaemonSets select. Pure: takes plain data, reads nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from kubectl_gpu import bundle
from kubectl_gpu.sharing.deployment import Found, running_plugins

Json = dict[str, Any]
MIN_VERSION = (1, 30)
NVIDIA_HANDLER = "nvidia"


@dataclasses.dataclass(frozen=True)
class Request:
    """What the user said; None where the install should decide."""

    options: bundle.Options  # namespace, versions, image; mode etc. as given or defaulted
    mode: bundle.Mode | None = None
    runtime_class: str | None = None  # "": none, on purpose
    operator_namespace: str | None = None
    replace_plugin: bool = False


@dataclasses.dataclass(frozen=True)
class Facts:
    """The cluster as read before the first write."""

    version: tuple[int, int]
    namespaces: frozenset[str]
    runtime_classes: Mapping[str, str]  # name -> handler
    cluster_policies: Sequence[Json] = ()
    daemonsets: Sequence[Json] = ()
    nodes: Sequence[Json] = ()
    installed: bundle.Options | None = None  # what our namespace records, when installed


@dataclasses.dataclass(frozen=True)
class Plan:
    options: bundle.Options
    notes: tuple[str, ...] = ()  # what was found and decided, for the user
    warnings: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()  # each one stops the install before anything is written
    replaces: tuple[Found, ...] = ()  # device plugins to delete (--replace-plugin)


@dataclasses.dataclass
class _Draft:
    options: bundle.Options
    notes: list[str] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)
    replaces: tuple[Found, ...] = ()

    def set(self, **changes: Any) -> None:
        self.options = dataclasses.replace(self.options, **changes)


def decide(request: Request, facts: Facts) -> Plan:
    """The options to install with, what to say, and what stops the install. Running install
    again without --mode keeps the mode (and plugin namespace) it was installed with."""
    before = facts.installed
    if before is not None and request.mode is None:
        namespace = request.operator_namespace or before.operator_namespace
        request = dataclasses.replace(request, mode=before.mode, operator_namespace=namespace)
    draft = _Draft(request.options)
    if facts.version < MIN_VERSION:
        draft.problems.append(
            f"Kubernetes {facts.version[0]}.{facts.version[1]} is too old: the agent's admission "
            "policy needs 1.30 or newer (ValidatingAdmissionPolicy v1 and the service-account "
            "token's node claim)"
        )
    _choose_mode(draft, request, facts)
    if draft.options.mode == "operator" and draft.options.operator_namespace not in (
        facts.namespaces
    ):
        draft.problems.append(
            f"namespace {draft.options.operator_namespace} does not exist: operator mode puts the "
            "agent's device-plugin restart Role there (--operator-namespace NS: where the device "
            "plugin runs)"
        )
    _choose_runtime_class(draft, request, facts)
    _check_nodes(draft, facts)
    return Plan(draft.options, tuple(draft.notes), tuple(draft.warnings), tuple(draft.problems),
                draft.replaces)  # fmt: skip


def _choose_mode(draft: _Draft, request: Request, facts: Facts) -> None:
    ours = draft.options.namespace
    found = running_plugins(facts.cluster_policies, facts.daemonsets)
    others = [f for f in found if not (f.kind == "bundle" and f.namespace == ours)]
    for other in (f for f in others if f.kind == "bundle"):
        draft.problems.append(
            f"kubectl-gpu is already installed in namespace {other.namespace} "
            f"({other.describe()}): uninstall it there, or install with -n {other.namespace}"
        )
    others = [f for f in others if f.kind != "bundle"]
    operator = next((f for f in others if f.kind == "gpu-operator"), None)
    if operator is not None:
        _beside_operator(draft, request, operator)
    elif others:
        _beside_plugin(draft, request, tuple(others))
    else:
        draft.set(mode=request.mode or "bundle")
        if request.replace_plugin:
            draft.notes.append("--replace-plugin: no other device plugin found, nothing replaced")


def _beside_operator(draft: _Draft, request: Request, operator: Found) -> None:
    if request.mode == "bundle":
        draft.problems.append(
            f"found the {operator.describe()}, which runs NVIDIA's device plugin: a second one "
            "would advertise the same GPUs twice (use --mode operator, the default here)"
        )
        return
    namespace = request.operator_namespace or operator.namespace or draft.options.namespace
    draft.set(mode="operator", operator_namespace=namespace)
    draft.notes.append(
        f"found the {operator.describe()}: installing the agent only (operator mode); the "
        "operator's device plugin and MIG manager stay in charge"
    )


def _beside_plugin(draft: _Draft, request: Request, plugins: tuple[Found, ...]) -> None:
    named = ", ".join(p.describe() for p in plugins)
    if request.mode == "operator":
        namespace = request.operator_namespace or plugins[0].namespace
        draft.set(mode="operator", operator_namespace=namespace)
        draft.notes.append(f"found the {named}: installing the agent only, beside it")
        return
    if request.mode == "bundle" and request.replace_plugin:
        draft.set(mode="bundle")
        draft.replaces = plugins
        draft.notes.append(
            f"--replace-plugin: deleting the {named}; the bundle's device plugin takes over "
            "(a Helm release brings its DaemonSet back on the next upgrade: `helm uninstall` it)"
        )
        return
    draft.problems.append(
        f"found the {named}: the bundle would add a second device plugin advertising the same "
        f"GPUs; keep it and install the agent only (--mode operator --operator-namespace "
        f"{plugins[0].namespace}), or replace it (--mode bundle --replace-plugin)"
    )


def _choose_runtime_class(draft: _Draft, request: Request, facts: Facts) -> None:
    wanted = request.runtime_class
    if wanted == "":
        draft.set(runtime_class="")
        draft.notes.append("runtime class: none (the nodes' default runtime must be nvidia)")
        return
    if wanted is not None:
        if wanted not in facts.runtime_classes:
            known = ", ".join(sorted(facts.runtime_classes)) or "none"
            draft.problems.append(
                f"RuntimeClass {wanted} does not exist (the cluster has: {known}); "
                "--runtime-class '' where nvidia is the nodes' default runtime"
            )
        draft.set(runtime_class=wanted)
        return
    found = _nvidia_runtime_class(facts)
    draft.set(runtime_class=found)
    if found:
        draft.notes.append(f"runtime class: {found} (the NVIDIA container runtime)")
    else:
        draft.warnings.append(
            "no RuntimeClass for the NVIDIA runtime: assuming nvidia is the nodes' default "
            "runtime (otherwise the agent sees no GPU; --runtime-class NAME to choose one)"
        )


def _nvidia_runtime_class(facts: Facts) -> str:
    """The operator's own runtime class where it names one, else one whose handler is nvidia."""
    for policy in facts.cluster_policies:
        named = ((policy.get("spec") or {}).get("operator") or {}).get("runtimeClass")
        name = str(named or NVIDIA_HANDLER)
        if name in facts.runtime_classes:
            return name
    if facts.runtime_classes.get(NVIDIA_HANDLER) == NVIDIA_HANDLER:
        return NVIDIA_HANDLER
    handled = sorted(n for n, h in facts.runtime_classes.items() if h == NVIDIA_HANDLER)
    return handled[0] if handled else ""


def _check_nodes(draft: _Draft, facts: Facts) -> None:
    unplaced = sorted(_name(n) for n in facts.nodes
                      if bundle.has_gpus(n) and not bundle.is_gpu_node(n))  # fmt: skip
    if unplaced:
        draft.problems.append(
            f"nodes with GPUs that our DaemonSets would not run on: {', '.join(unplaced)} (no "
            "NFD, GFD or nvidia.com/gpu.present label); label them, e.g. `kubectl label node "
            f"{unplaced[0]} nvidia.com/gpu.present=true`"
        )
    elif not any(bundle.is_gpu_node(n) for n in facts.nodes):
        draft.warnings.append(
            "no node carries a GPU label (NFD's pci-10de, GFD's nvidia.com/gpu.count or "
            "nvidia.com/gpu.present=true): no agent pod will start until one does"
        )


def _name(node: Json) -> str:
    return str((node.get("metadata") or {}).get("name", ""))
