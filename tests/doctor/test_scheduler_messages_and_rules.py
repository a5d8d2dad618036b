"""The scheduler layer: FitError messages read back, taints, selectors, resource names."""

from __future__ import annotations

import pytest

from kubectl_gpu.doctor import facts, placement, scheduler
from tests.doctor.builders import GPU_TAINT, node, pod

CONTROL_PLANE = "node-role.kubernetes.io/control-plane"

FIT = (
    "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) had untolerated taint "
    "{nvidia.com/gpu: present}. preemption: 0/3 nodes are available: 1 No preemption victims "
    "found for incoming pod, 2 Preemption is not helpful for scheduling."
)


def test_fit_error_is_read_into_counts_and_reasons() -> None:
    fit = placement.parse_fit_error(FIT)
    assert fit is not None and fit.total == 3
    assert fit.reasons == (
        (1, "Insufficient nvidia.com/gpu"),
        (2, "node(s) had untolerated taint {nvidia.com/gpu: present}"),
    )
    assert fit.preemption.startswith("0/3 nodes are available: 1 No preemption victims")


# The real kube-scheduler's words for one pod asking 1 nvidia.com/gpu on a cluster of one
# tainted GPU node and one CPU node (tests/harness/test_sim_scheduler_and_kubelet_share_one_gpu.py):
# neither 1.34.4 nor 1.37.2 names the taint; 1.34 adds DRA's sentence before the preemption part.
TAINT_137 = (
    "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint(s). "
    "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
)
TAINT_134 = (
    "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint(s). "
    "no new claims to deallocate, preemption: 0/2 nodes are available: 2 Preemption is not "
    "helpful for scheduling."
)
FULL_134 = (
    "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. no new claims to deallocate, "
    "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 "
    "Preemption is not helpful for scheduling."
)


@pytest.mark.parametrize(
    ("message", "reasons", "preemption"),
    [
        (
            FULL_134,
            ((3, "Insufficient nvidia.com/gpu"),),
            "0/3 nodes are available: 1 No preemption victims found for incoming pod, "
            "2 Preemption is not helpful for scheduling.",
        ),
        (
            TAINT_134,
            ((1, "Insufficient nvidia.com/gpu"), (1, "node(s) had untolerated taint(s)")),
            "0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
        ),
    ],
)
def test_the_sentence_after_the_reasons_is_no_reason(
    message: str, reasons: tuple[tuple[int, str], ...], preemption: str
) -> None:
    fit = placement.parse_fit_error(message)
    assert fit is not None and fit.reasons == reasons
    assert fit.preemption == preemption


@pytest.mark.parametrize("message", [TAINT_137, TAINT_134])
def test_a_taint_the_event_counts_but_does_not_name_is_named_from_the_nodes(
    message: str,
) -> None:
    # the GPU node's device plugin has not started (it advertises nothing), and the pod would
    # not land there once it does: the taint must be said, with the toleration that fixes it
    waiting = node("gpu-1", taints=[GPU_TAINT], capacity={})
    control_plane = facts.node_from_dict(
        {
            "metadata": {"name": "cp-1"},
            "spec": {"taints": [{"key": CONTROL_PLANE, "effect": "NoSchedule"}]},
        },
        {},
    )
    event = facts.Event("FailedScheduling", message, "Warning", "default-scheduler", 1)

    found = scheduler.check(pod(), [waiting, control_plane], [event])

    [taint] = [d for d in found if "taint" in d.message]
    assert (taint.severity, taint.message) == (
        "error",
        "untolerated taint nvidia.com/gpu=present:NoSchedule on 1 GPU node(s): gpu-1",
    )
    assert taint.fix == (
        "add to the pod spec: tolerations: [{key: nvidia.com/gpu, operator: Exists, "
        "effect: NoSchedule}]"
    )
    assert f"FailedScheduling: {message}" in taint.evidence
    # a tolerating pod is told nothing about taints (the control plane's is no GPU node's)
    tolerating = pod(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])
    found = scheduler.check(tolerating, [waiting, control_plane], [event])
    assert [d.message for d in found if "taint" in d.message] == []


def test_other_messages_are_not_fit_errors() -> None:
    assert placement.parse_fit_error("Successfully assigned ml/train to gpu-a") is None


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, True),
        ({"key": "nvidia.com/gpu", "value": "present"}, True),
        ({"key": "nvidia.com/gpu", "value": "absent"}, False),
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"operator": "Exists"}, True),
        ({"key": "other", "operator": "Exists"}, False),
    ],
)
def test_tolerations_follow_core_v1(toleration: dict[str, str], tolerated: bool) -> None:
    taint = facts.Taint("nvidia.com/gpu", "present", "NoSchedule")
    assert placement.tolerates(toleration, taint) is tolerated


def test_affinity_terms_are_ored_and_expressions_anded() -> None:
    terms = [
        {
            "matchExpressions": [
                {"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["40000"]}
            ]
        },
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
    ]
    raw = {
        "metadata": {"name": "p"},
        "spec": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
                }
            }
        },
    }
    wanting = facts.pod_from_dict(raw)
    assert placement.unmet(wanting, node("big", 1, labels={"nvidia.com/gpu.memory": "81559"})) == ()
    assert placement.unmet(wanting, node("zone-a", 1, labels={"zone": "a"})) == ()
    [missed] = placement.unmet(wanting, node("small", 1, labels={"nvidia.com/gpu.memory": "23034"}))
    assert missed.startswith("required node affinity (nvidia.com/gpu.memory Gt 40000 or zone In a)")


def test_a_shared_product_label_gets_the_rename_advice() -> None:
    wanting = pod(selector={"nvidia.com/gpu.product": "Tesla-T4"})
    shared = node("t4", 4, labels={"nvidia.com/gpu.product": "Tesla-T4-SHARED"})
    [mismatch] = scheduler.check(wanting, [shared], [])
    assert "free products: Tesla-T4-SHARED" in mismatch.message
    assert mismatch.fix.startswith("sharing renamed the product label to Tesla-T4-SHARED")


def test_a_full_gpu_request_on_mixed_mig_nodes_names_the_mig_resources() -> None:
    mig = node("a100", capacity={"nvidia.com/mig-1g.10gb": "7"})
    [missing] = scheduler.check(pod(), [mig], [])
    assert "MIG strategy mixed on a100 advertises only nvidia.com/mig-*" in missing.message
    assert "nvidia.com/mig-1g.10gb" in missing.fix


def test_taints_on_full_nodes_are_only_warnings() -> None:
    full = node("h100", 2, used=2, taints=[GPU_TAINT])
    found = scheduler.check(pod(), [full], [])
    assert [(d.severity, d.message.split(" on ")[0]) for d in found] == [
        ("warning", "untolerated taint nvidia.com/gpu=present:NoSchedule"),
        ("error", "no node has 1 free nvidia.com/gpu: all are in use"),
    ]


def test_no_victims_gives_a_priority_note() -> None:
    event = facts.Event("FailedScheduling", FIT, "Warning", "default-scheduler", 1)
    full = node("h100", 1, used=1)
    notes = [d for d in scheduler.check(pod(), [full], [event]) if d.severity == "info"]
    assert [n.message.split(":")[0] for n in notes] == [
        "no lower-priority pods to evict for the pod (default priority)"
    ]


def test_a_pod_without_gpus_gets_the_event_as_its_reason() -> None:
    event = facts.Event(
        "FailedScheduling", "0/1 nodes are available: 1 Too many pods.", "Warning", "s", 1
    )
    found = scheduler.check(pod({}), [node("a", 1)], [event])
    [generic] = found + scheduler.unexplained(pod({}), [event], found)
    assert generic.severity == "error"
    assert generic.evidence == ("FailedScheduling: 0/1 nodes are available: 1 Too many pods.",)
