"""Telling a node whose MIG change is stuck, and what `mig recover` puts back.

Owns the rules (the issue behind gpu-operator#2833, #2495, #1607: a MIG manager that aborts
leaves `nvidia.com/mig.config.state=pending` and `nvidia.com/gpu.deploy.*=paused-for-mig-change`
for ever, and the node advertises no GPUs): a change pending for longer than a threshold (the
agent records since when, `kubectl-gpu.io/mig.pending-since`), operands left
`paused-for-mig-change` with no change running, and our state label saying `success` while the
agent's report shows GPUs whose MIG devices disagree with the layout it recorded. Also the
labels `mig recover` restores. Must not read the cluster or the clock (`now` is an argument).
Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Mapping, Sequence

from kubectl_gpu import keys

PENDING = "pending"
DEFAULT_AFTER = dt.timedelta(minutes=30)  # mig-manager's longest normal run, reboot included
NO_DEVICES = ("MIG off", "MIG on, empty", "not MIG-capable")  # layout texts without devices
STATE_LABELS = (keys.MIG_STATE_LABEL, keys.MIG_CONFIG_STATE_LABEL)


@dataclasses.dataclass(frozen=True)
class ReportedGpu:
    """One GPU as the agent's report shows it: MIG on or off, and its MIG devices."""

    index: int
    mig_enabled: bool
    mig_devices: int


@dataclasses.dataclass(frozen=True)
class NodeMig:
    """What a node says about its MIG change: its labels, annotations and reported GPUs."""

    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    reported: Sequence[ReportedGpu] | None = None  # None: no report from the agent
    actuator: str = ""  # who acts: "the GPU Operator's MIG manager" or "the kubectl-gpu agent"
    actuator_runs: bool | None = None  # whether its pod runs on the node (None: not looked)


def reasons(
    node: NodeMig, now: dt.datetime, after: dt.timedelta = DEFAULT_AFTER
) -> tuple[str, ...]:
    """Why the node's MIG change (or a drain for one) is stuck; empty when it is not."""
    return (*mig_reasons(node, now, after), *drain_reasons(node, now, after))


def mig_reasons(
    node: NodeMig, now: dt.datetime, after: dt.timedelta = DEFAULT_AFTER
) -> tuple[str, ...]:
    """Why the node's MIG change itself is stuck."""
    found = []
    stale = _stale_pending(node, now, after) or _orphaned(node)
    if stale:
        found.append(stale)
    paused = paused_labels(node.labels)
    running = pending_label(node.labels) and not stale
    if paused and not running:
        found.append(
            f"{', '.join(sorted(paused))} left {keys.PAUSED_FOR_MIG_CHANGE} with no MIG change "
            "running: the node advertises no GPUs"
        )
    found += _disagreements(node)
    return tuple(found)


def drain_record(annotations: Mapping[str, str]) -> dict[str, object]:
    """A `--drain` run's record on the node ({} when none or unreadable)."""
    try:
        found = json.loads(annotations.get(keys.DRAIN_ANNOTATION) or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def drain_reasons(node: NodeMig, now: dt.datetime, after: dt.timedelta) -> list[str]:
    """A drain that stopped (or was interrupted) and was not taken up again."""
    record = drain_record(node.annotations)
    since = pending_since({keys.MIG_PENDING_SINCE_ANNOTATION: str(record.get("since", ""))})
    if not record or since is None:
        return []
    stopped = bool(record.get("reason"))
    if not stopped and now - since <= after:
        return []
    why = f": {record['reason']}" if stopped else f" since {timestamp(since)}"
    cordoned = "; kubectl gpu cordoned the node" if record.get("cordoned") else ""
    change, step = record.get("change", "?"), record.get("step")
    return [f"a drain for {change} stopped at step {step}{why}{cordoned}"]


def pending_label(labels: Mapping[str, str]) -> str:
    """The state label that says `pending` ("" when none does)."""
    return next((k for k in STATE_LABELS if labels.get(k) == PENDING), "")


def paused_labels(labels: Mapping[str, str]) -> list[str]:
    """The operator's `gpu.deploy.*` labels set to paused-for-mig-change."""
    return [
        k
        for k, v in labels.items()
        if k.startswith(keys.DEPLOY_LABEL_PREFIX) and v == keys.PAUSED_FOR_MIG_CHANGE
    ]


def restored_labels(node: NodeMig) -> dict[str, str]:
    """What each paused label goes back to: the value the agent kept, else `true` (the
    operator's value for a deployed operand; mig-manager keeps its own nowhere)."""
    kept = node.annotations.get(keys.MIG_PAUSED_PLUGIN_ANNOTATION) or "true"
    return {
        k: kept if k == keys.DEPLOY_DEVICE_PLUGIN_LABEL else "true"
        for k in paused_labels(node.labels)
    }


def pending_since(annotations: Mapping[str, str]) -> dt.datetime | None:
    """The agent's record of since when the change has been pending (None: unknown)."""
    text = annotations.get(keys.MIG_PENDING_SINCE_ANNOTATION, "")
    try:
        since = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return since if since.tzinfo else since.replace(tzinfo=dt.timezone.utc)


def timestamp(now: dt.datetime) -> str:
    """RFC 3339 in UTC, to the second, as Kubernetes writes times."""
    return now.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def age(seconds: float) -> str:
    """`42m`, `3h5m`, `2d4h`: kubectl's way of writing an age."""
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes}m" if minutes else f"{int(seconds)}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h" if hours else f"{days}d"


def _stale_pending(node: NodeMig, now: dt.datetime, after: dt.timedelta) -> str:
    label = pending_label(node.labels)
    since = pending_since(node.annotations)
    if not label or since is None or now - since <= after:
        return ""
    waited = age((now - since).total_seconds())
    return (
        f"{label}=pending for {waited} (longer than {age(after.total_seconds())}) since "
        f"{timestamp(since)}"
    )


def _orphaned(node: NodeMig) -> str:
    """Pending, but the pod that would be making the change does not run on the node."""
    label = pending_label(node.labels)
    if not label or node.actuator_runs is not False:
        return ""
    return f"{label}=pending, but no pod of {node.actuator} runs on the node to make the change"


def _disagreements(node: NodeMig) -> list[str]:
    """Our `success` against the devices the agent reports now, GPU by GPU."""
    if node.labels.get(keys.MIG_STATE_LABEL) != "success" or node.reported is None:
        return []
    layout = _layout(node.annotations.get(keys.MIG_LAYOUT_ANNOTATION, ""))
    found = []
    for gpu in node.reported:
        recorded = layout.get(str(gpu.index))
        if recorded is None or recorded == "not MIG-capable":
            continue
        wants_devices = recorded not in NO_DEVICES
        if wants_devices != (gpu.mig_devices > 0) or (recorded == "MIG off") == gpu.mig_enabled:
            shows = f"{gpu.mig_devices} MIG device(s)" if gpu.mig_enabled else "MIG off"
            found.append(
                f"{keys.MIG_STATE_LABEL}=success but GPU {gpu.index} shows {shows}, not the "
                f"applied layout {recorded}"
            )
    return found


def _layout(text: str) -> dict[str, str]:
    try:
        loaded = json.loads(text) if text else {}
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}
