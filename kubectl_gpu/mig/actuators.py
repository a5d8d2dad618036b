"""Which component changes a node's MIG layout: our node agent or the GPU Operator's MIG manager.

Owns the one rule both the CLI and the agent follow (docs/upstream-facts.md M3.4): a node is the
operator's MIG manager's when a ClusterPolicy leaves `migManager.enabled` not false and the node
carries `nvidia.com/gpu.deploy.mig-manager=true` or a `nvidia.com/mig.config` label. Also which
label of the *other* actuator on a node would make two actuators act on it. Must not read the
cluster or decide what layout a node gets. Pure: standard library only.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any

from kubectl_gpu import keys


class Actuator(str, enum.Enum):
    """Who applies a MIG config on a node."""

    AGENT = "kubectl-gpu"  # our node agent, through kubectl-gpu.io/mig.config
    OPERATOR = "gpu-operator"  # the GPU Operator's MIG manager, through nvidia.com/mig.config


def operator_manages(policies: Iterable[Mapping[str, Any]], labels: Mapping[str, str]) -> bool:
    """True when a ClusterPolicy enables the MIG manager and it is deployed on this node."""
    enabled = any(
        ((p.get("spec") or {}).get("migManager") or {}).get("enabled", True) is not False
        for p in policies
    )
    deployed = labels.get(keys.DEPLOY_MIG_MANAGER_LABEL) == "true"
    return enabled and (deployed or keys.MIG_CONFIG_LABEL in labels)


def choose(policies: Iterable[Mapping[str, Any]], labels: Mapping[str, str]) -> Actuator:
    """The actuator of a node with these labels, in a cluster with these ClusterPolicies."""
    return Actuator.OPERATOR if operator_manages(policies, labels) else Actuator.AGENT


def rival_label(actuator: Actuator, labels: Mapping[str, str]) -> str:
    """The other actuator's request label on the node ("" when none): it must go first.

    For our agent that is `nvidia.com/mig.config` (a MIG manager, perhaps one deployed without
    the operator, acts on it); for the operator it is our `kubectl-gpu.io/mig.config`.
    """
    rival = keys.MIG_DESIRED_LABEL if actuator is Actuator.OPERATOR else keys.MIG_CONFIG_LABEL
    return rival if rival in labels else ""
