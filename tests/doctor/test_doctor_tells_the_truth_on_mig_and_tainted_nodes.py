"""`doctor` tells the truth: whole-GPU capacity left over from a MIG change is not unhealthy
GPUs, a taint on a node the pod cannot use anyway is no error, an all-MIG node is not a full
node to wait for, and an untolerated taint the scheduler's own event names is reported."""

from __future__ import annotations

from collections.abc import Callable

from kubectl_gpu.doctor import facts, health, scheduler
from tests.conftest import CliResult
from tests.doctor.builders import GPU_TAINT, node, pod
from tests.kit.cluster import NodeSpec
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import layouts

PRODUCT = "nvidia.com/gpu.product"


def _all_mig(name: str = "a100") -> facts.Node:
    # kubelet keeps a resource the plugin stopped advertising in capacity, allocatable 0
    return node(
        name,
        capacity={"nvidia.com/gpu": "8", "nvidia.com/mig-3g.40gb": "16"},
        allocatable={"nvidia.com/gpu": "0", "nvidia.com/mig-3g.40gb": "16"},
        labels={PRODUCT: "NVIDIA-A100-SXM4-80GB", "nvidia.com/mig.strategy": "mixed"},
    )


def test_whole_gpu_capacity_left_by_a_mig_change_is_not_unhealthy_gpus() -> None:
    found = health.check([_all_mig()], [], None)

    assert not [d for d in found if "unhealthy" in d.message], found


def test_a_gpu_taken_out_of_allocatable_is_still_unhealthy_on_a_mig_node() -> None:
    sick = node(
        "a100",
        capacity={"nvidia.com/mig-3g.40gb": "16"},
        allocatable={"nvidia.com/mig-3g.40gb": "15"},
    )
    [unhealthy] = [d for d in health.check([sick], [], None) if "unhealthy" in d.message]
    assert unhealthy.message.startswith("1 of 16 nvidia.com/mig-3g.40gb on node a100")


def test_a_taint_on_a_node_the_pod_does_not_select_is_not_an_error() -> None:
    wanting = pod(selector={PRODUCT: "NVIDIA-H100-80GB-HBM3"})
    full_h100 = node("h100", 1, used=1, labels={PRODUCT: "NVIDIA-H100-80GB-HBM3"})
    tainted_t4 = node("t4", 1, labels={PRODUCT: "Tesla-T4"}, taints=[GPU_TAINT])

    found = scheduler.check(wanting, [full_h100, tainted_t4], [])

    assert not [d for d in found if "taint" in d.message and d.severity == "error"], found


def test_an_all_mig_node_is_not_a_full_node_to_wait_for() -> None:
    wanting = pod(selector={PRODUCT: "NVIDIA-A100-SXM4-80GB"})
    free_t4 = node("t4", 1, labels={PRODUCT: "Tesla-T4"})

    found = scheduler.check(wanting, [_all_mig(), free_t4], [])

    said = " ".join(
        [d.message for d in found] + [d.fix for d in found] + [e for d in found for e in d.evidence]
    )
    assert "0/0" not in said and "wait" not in said, found
    assert "nvidia.com/mig-" in said  # what the matching node offers instead


def test_an_untolerated_taint_named_by_the_scheduler_is_reported() -> None:
    message = (
        "0/2 nodes are available: 2 node(s) had untolerated taint {dedicated: training}. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    event = facts.Event("FailedScheduling", message, "Warning", "default-scheduler", 3)
    # the taint is on nodes doctor does not count as GPU nodes for this pod (here: none it
    # can see), yet the scheduler names it: it must be said, not replaced by a generic line
    found = scheduler.check(pod(), [node("h100", 1, used=1)], [event])

    [named] = [d for d in found if "dedicated" in d.message]
    assert "untolerated taint dedicated=training" in named.message
    assert "tolerations" in named.fix


def test_share_show_and_doctor_find_no_false_problem_on_an_all_mig_node(
    run_cli: Callable[..., CliResult],
    sim_cluster: MakeSimCluster,
) -> None:
    spec = NodeSpec(
        "gpu-a", "A100-SXM4-80GB", 2, gpu_taint=True,
        mig={0: ["3g.40gb", "3g.40gb"], 1: ["3g.40gb", "3g.40gb"]},
    )  # fmt: skip
    cluster = sim_cluster([spec], layouts.gpu_operator(mig_strategy="mixed"))
    cluster.settle(10)
    gpu = ("--kubeconfig", str(cluster.kubeconfig))

    shown = run_cli(*gpu, "share", "show", "-o", "json")
    doctor = run_cli(*gpu, "doctor", "-o", "json")

    [row] = shown.json["nodes"]
    assert row["problems"] == [], row
    assert doctor.exit_code == 0, doctor.stdout
    assert not [d for d in doctor.json["diagnoses"] if d["severity"] != "info"], doctor.stdout
