"""One MIG actuator per node: the GPU Operator's MIG manager where a ClusterPolicy enables it
and the node carries its deploy label or `nvidia.com/mig.config`, else kubectl gpu's agent; and
the other actuator's label on a node is named so that it can be removed."""

from __future__ import annotations

import pytest

from kubectl_gpu import keys
from kubectl_gpu.agent import nodestate
from kubectl_gpu.mig import actuators
from kubectl_gpu.mig.actuators import Actuator

ENABLED = [{"spec": {"migManager": {"enabled": True}}}]
DEFAULTED = [{"spec": {}}]  # migManager.enabled defaults to true in the operator's chart
DISABLED = [{"spec": {"migManager": {"enabled": False}}}]
DEPLOYED = {keys.DEPLOY_MIG_MANAGER_LABEL: "true"}
LABELLED = {keys.MIG_CONFIG_LABEL: "all-disabled"}


@pytest.mark.parametrize(
    ("policies", "labels", "expected"),
    [
        (ENABLED, DEPLOYED, Actuator.OPERATOR),
        (DEFAULTED, DEPLOYED, Actuator.OPERATOR),
        (ENABLED, LABELLED, Actuator.OPERATOR),
        (ENABLED, {keys.DEPLOY_MIG_MANAGER_LABEL: "false"}, Actuator.AGENT),
        (ENABLED, {}, Actuator.AGENT),
        (DISABLED, {**DEPLOYED, **LABELLED}, Actuator.AGENT),
        ([], {**DEPLOYED, **LABELLED}, Actuator.AGENT),
        (DISABLED + ENABLED, DEPLOYED, Actuator.OPERATOR),
    ],
)
def test_the_actuator_follows_the_cluster_policy_and_the_node_labels(
    policies: list[dict[str, object]], labels: dict[str, str], expected: Actuator
) -> None:
    assert actuators.choose(policies, labels) is expected


def test_the_agent_refuses_by_the_same_rule_as_the_cli() -> None:
    assert nodestate.operator_manages is actuators.operator_manages


@pytest.mark.parametrize(
    ("actuator", "labels", "rival"),
    [
        (Actuator.OPERATOR, {keys.MIG_DESIRED_LABEL: "a"}, keys.MIG_DESIRED_LABEL),
        (Actuator.OPERATOR, LABELLED, ""),
        (Actuator.AGENT, LABELLED, keys.MIG_CONFIG_LABEL),
        (Actuator.AGENT, {keys.MIG_DESIRED_LABEL: "a"}, ""),
    ],
)
def test_the_other_actuators_label_is_named(
    actuator: Actuator, labels: dict[str, str], rival: str
) -> None:
    assert actuators.rival_label(actuator, labels) == rival
