"""What a `mig apply` interrupted (Ctrl-C, SIGTERM, the terminal closing) left behind, and how
to finish or undo it.

Owns telling, from the cluster after the fact, which nodes were asked for the config (their
actuator's request label names it: ours `kubectl-gpu.io/mig.config`, the GPU Operator's
`nvidia.com/mig.config`) and which a `--drain` of `mig apply` holds cordoned; an asked node's
actuator goes on by itself, so waiting is finished by running the command again or watching
`mig status`, and the change is undone by applying the config the node had before. Must not
write anything.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubectl_gpu import cluster, errors, keys
from kubectl_gpu.mig.actuators import Actuator
from kubectl_gpu.workflows import drain
from kubectl_gpu.workflows.mig.request import ApplyRequest
from kubectl_gpu.workflows.mig.targets import NodeFacts

DRAIN_CHANGE = "mig apply "  # how a mig apply's drain record names its change


def interrupted(
    api: cluster.Api, request: ApplyRequest, facts: Sequence[NodeFacts], cause: BaseException
) -> errors.GpuError:
    """The error for an interrupted `mig apply`, exiting 128 + the signal."""
    unread = ""
    try:
        asked, cordoned = _asked(api, request, facts), _cordoned(api, facts)
    except errors.ClusterError as e:
        asked, cordoned, unread = None, [], e.message
    hints = ["`kubectl gpu mig status` shows where each node stands"]
    if asked is None:
        message = f"mig apply was interrupted; what it wrote cannot be read now ({unread})"
    elif asked:
        message = (
            f"mig apply was interrupted after asking {', '.join(asked)} for config "
            f"{request.config}; their MIG actuator goes on by itself"
        )
        hints.append("to finish, run the same command again (it waits for them)")
        hints.append("to undo, apply the config each had before: " + _before(facts, asked))
    else:
        message = "mig apply was interrupted before it asked any node for the config"
    if cordoned:
        message += f"; --drain holds {', '.join(cordoned)} cordoned"
        hints.append(f"`kubectl gpu mig recover {cordoned[0]} --force` gives a node back")
    error = errors.GpuError(message, hint="; ".join(hints))
    error.exit_code = errors.interrupted_code(cause)
    return error


def _asked(api: cluster.Api, request: ApplyRequest, facts: Sequence[NodeFacts]) -> list[str]:
    found = []
    for node in facts:
        labels = _labels(api.get(cluster.path("nodes", node.name)))
        label = (
            keys.MIG_CONFIG_LABEL if node.actuator is Actuator.OPERATOR else keys.MIG_DESIRED_LABEL
        )
        if labels.get(label) == request.config and node.labels.get(label) != request.config:
            found.append(node.name)
    return found


def _cordoned(api: cluster.Api, facts: Sequence[NodeFacts]) -> list[str]:
    return [
        node.name
        for node in facts
        if str(
            drain.record_of(api.get(cluster.path("nodes", node.name))).get("change", "")
        ).startswith(DRAIN_CHANGE)
    ]


def _before(facts: Sequence[NodeFacts], asked: Sequence[str]) -> str:
    """`node: config` pairs of what the asked nodes were asked for before this run."""
    parts = []
    for node in (f for f in facts if f.name in asked):
        label = (
            keys.MIG_CONFIG_LABEL if node.actuator is Actuator.OPERATOR else keys.MIG_DESIRED_LABEL
        )
        parts.append(f"{node.name}: {node.labels.get(label) or 'none (MIG as it was)'}")
    return ", ".join(parts) + " (kubectl gpu mig apply -f FILE -c CONFIG --node NODE)"


def _labels(node: dict[str, object]) -> dict[str, str]:
    meta = node.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}
