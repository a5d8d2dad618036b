"""What the agent reads from and reports on its own Node, and the cluster facts it needs.

Owns `NodeState` (the Node's labels and annotations of ours, read once per pass and written
only where a value changes: docs/architecture.md, "The agent"), reading the desired
config from our ConfigMap as a request key and specs, whether the GPU Operator's MIG manager
is this node's actuator (then the agent refuses: never two actuators on one node), the
device plugin's deployment, and the node's allocatable. Must not decide what to do next.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from typing import Any

from kubectl_gpu import cluster, errors, keys, validation
from kubectl_gpu.mig import apply, stuck
from kubectl_gpu.mig.actuators import operator_manages
from kubectl_gpu.mig.apply import Phase, State
from kubectl_gpu.mig.spec import MigDeviceSpec
from kubectl_gpu.mig.state import MigState
from kubectl_gpu.sharing import deployment as deployments
from kubectl_gpu.sharing.deployment import Deployment
from kubectl_gpu.validation import holders

Json = dict[str, Any]
_UNSET = object()


@dataclasses.dataclass
class NodeState:
    """This pass's view of the Node object."""

    api: cluster.Api
    name: str
    meta: Json

    @classmethod
    def read(cls, api: cluster.Api, name: str) -> NodeState:
        return cls(api, name, api.get(cluster.path("nodes", name)).get("metadata") or {})

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.meta.get("labels") or {})

    @property
    def annotations(self) -> dict[str, str]:
        return dict(self.meta.get("annotations") or {})

    @property
    def desired(self) -> str:
        return self.labels.get(keys.MIG_DESIRED_LABEL, "")

    @property
    def forced(self) -> str:
        return self.annotations.get(keys.MIG_FORCE_ANNOTATION, "")

    @property
    def strategy(self) -> str | None:
        return self.labels.get(keys.MIG_STRATEGY_LABEL) or None

    def record(self) -> apply.Record:
        notes = self.annotations
        return apply.Record.from_values(
            notes.get(keys.MIG_REQUEST_ANNOTATION, ""),
            self.labels.get(keys.MIG_STATE_LABEL, ""),
            notes.get(keys.MIG_PHASE_ANNOTATION, ""),
        )

    def report(
        self,
        state: State,
        *,
        request: str | None = None,
        phase: Phase | None | object = _UNSET,
        reason: str | None = None,
    ) -> None:
        """Write the state label and our annotations, only those that change."""
        notes: dict[str, str | None] = {}
        if request is not None:
            notes[keys.MIG_REQUEST_ANNOTATION] = request
        if phase is not _UNSET:
            notes[keys.MIG_PHASE_ANNOTATION] = phase.value if isinstance(phase, Phase) else None
        if reason is not None:
            notes[keys.MIG_REASON_ANNOTATION] = reason or None
        self.write({keys.MIG_STATE_LABEL: state.value}, notes)

    def report_success(self, applied: str, layout: dict[str, str]) -> None:
        """The request is applied: record it and each GPU's layout; clear phase and reason."""
        notes: dict[str, str | None] = {
            keys.MIG_APPLIED_ANNOTATION: applied,
            keys.MIG_LAYOUT_ANNOTATION: json.dumps(layout, sort_keys=True),
            keys.MIG_PHASE_ANNOTATION: None,
            keys.MIG_REASON_ANNOTATION: None,
        }
        self.write({keys.MIG_STATE_LABEL: State.SUCCESS.value}, notes)

    def report_gpus(self, state: MigState) -> None:
        """The GPUs' identity for the CLI's offline check (index, PCI ID, name)."""
        gpus = [
            {"index": g.index, "pci": f"0x{g.pci_device_id:08X}", "name": g.model}
            for g in state.gpus
        ]
        self.write({}, {keys.MIG_GPUS_ANNOTATION: json.dumps(gpus, sort_keys=True)})

    def note_pending(self, now: dt.datetime) -> None:
        """Record since when a MIG change has been pending here, ours or the operator's MIG
        manager's (so that a stuck one can be told), and forget it once none is."""
        self.write({}, self._since(self.labels, now))

    def _since(self, labels: dict[str, str], now: dt.datetime) -> dict[str, str | None]:
        have = self.annotations.get(keys.MIG_PENDING_SINCE_ANNOTATION)
        if stuck.pending_label(labels):
            return {} if have else {keys.MIG_PENDING_SINCE_ANNOTATION: stuck.timestamp(now)}
        return {keys.MIG_PENDING_SINCE_ANNOTATION: None} if have else {}

    def write(self, labels: dict[str, str | None], notes: dict[str, str | None]) -> None:
        if keys.MIG_STATE_LABEL in labels:  # our state changes: keep since-when in step
            after = {k: v for k, v in {**self.labels, **labels}.items() if v is not None}
            notes = {**self._since(after, dt.datetime.now(dt.timezone.utc)), **notes}
        have_labels, have_notes = self.labels, self.annotations
        labels = {k: v for k, v in labels.items() if have_labels.get(k) != v}
        notes = {k: v for k, v in notes.items() if have_notes.get(k) != v}
        if not labels and not notes:
            return
        body = {"metadata": {"labels": labels, "annotations": notes}}
        updated = self.api.patch(cluster.path("nodes", self.name), body)
        self.meta = updated.get("metadata") or self.meta


def request_of(node: NodeState, name: str) -> str:
    """The request key of a name whose content cannot be read."""
    return f"{name}@?"


class ConfigRejected(errors.GpuError):
    """The desired config exists but `validate` rejects it; `request` is its request key."""

    def __init__(self, message: str, request: str) -> None:
        super().__init__(message)
        self.request = request


def read_config(
    api: cluster.Api, namespace: str, name: str
) -> tuple[str, tuple[MigDeviceSpec, ...]]:
    """The request key and specs of config `name` in our ConfigMap; GpuError when unusable.

    The key is read as a pod mounting the ConfigMap reads its file, as NVIDIA's
    config-manager does: under `data` as text or under `binaryData` as base64 of the file.
    The text passes exactly the checks of `kubectl gpu validate` and `mig validate` (as a
    mig-parted config) and is built once, by `validation.accept_mig_config`; a rejected one
    raises `ConfigRejected` in validation's one wording (key, line, problem, how many more,
    the `validate` hint), and is never applied.
    """
    where = f"ConfigMap {namespace}/{keys.MIG_CONFIGMAP}"
    try:
        configmap = api.get(cluster.path("configmaps", keys.MIG_CONFIGMAP, namespace))
    except errors.ClusterError as e:
        if e.status == 404:
            raise errors.GpuError(f"{where} does not exist") from e
        raise
    held = {**(configmap.get("data") or {}), **(configmap.get("binaryData") or {})}
    if not isinstance(held.get(name), str):
        raise errors.GpuError(f"config {name} is not in {where}")
    try:
        text, _ = holders.configmap_text(configmap, where, name)
    except errors.ConfigError as e:  # binaryData that is not a text file
        request = apply.request_key(name, str(held[name]))
        raise ConfigRejected(f"config {name} was not applied: {e.message}", request) from e
    request = apply.request_key(name, text)
    try:
        specs = validation.accept_mig_config(text, f"{where} key {name}").config.select(name)
    except validation.ConfigRejected as e:
        raise ConfigRejected(f"config {name} was not applied: {e.one_line}", request) from e
    except errors.GpuError as e:
        raise ConfigRejected(f"config {name} in {where} is unusable: {e.message}", request) from e
    return request, specs


def deployment(api: cluster.Api) -> Deployment | None:
    """The device plugin's deployment, or None when none is found."""
    policies, daemonsets = _list(api, "clusterpolicies"), _list(api, "daemonsets")
    try:
        return deployments.detect(policies, daemonsets)
    except errors.GpuError:  # e.g. a plugin without a config: MIG needs none
        return next(filter(None, map(_plain_plugin, daemonsets)), None)


def _plain_plugin(daemonset: Json) -> Deployment | None:
    """A device plugin DaemonSet that reads no sharing config (Helm without one, static)."""
    spec = ((daemonset.get("spec") or {}).get("template") or {}).get("spec") or {}
    container = deployments.plugin_container(spec)
    meta = daemonset.get("metadata") or {}
    if container is None or "feature-discovery" in str(meta.get("name", "")):
        return None
    selector = ((daemonset.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    helm = keys.APP_NAME_LABEL in (meta.get("labels") or {})
    return Deployment(
        kind="helm" if helm else "static",
        namespace=str(meta.get("namespace", "")),
        daemonset=str(meta.get("name", "")),
        pod_selector=tuple(sorted((str(k), str(v)) for k, v in selector.items())),
        container=str(container.get("name", "")),
        configmap="",
        default_key="",
        fallback_strategies=(),
    )


def operator_refusal(api: cluster.Api, node: NodeState) -> str:
    """Why the agent must not act here: the GPU Operator's MIG manager is this node's actuator."""
    if not operator_manages(_list(api, "clusterpolicies"), node.labels):
        return ""
    return (
        "the GPU Operator's MIG manager manages this node; use its nvidia.com/mig.config label "
        "(kubectl gpu mig apply does), not ours"
    )


def allocatable(api: cluster.Api, node: NodeState) -> dict[str, str]:
    """The node's status.allocatable now."""
    status = api.get(cluster.path("nodes", node.name)).get("status") or {}
    return {str(k): str(v) for k, v in (status.get("allocatable") or {}).items()}


def _list(api: cluster.Api, resource: str) -> list[Json]:
    try:
        return list(api.list(cluster.path(resource)))
    except errors.ClusterError as e:
        if e.status == 404:  # the CRD is not installed
            return []
        raise
