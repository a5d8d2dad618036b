"""Admission amounts and quotas; kubelet refusals; runtime and driver messages; health."""

from __future__ import annotations

import pytest

from kubectl_gpu import doctor
from kubectl_gpu.doctor import admission, facts, health, nodeside
from tests.doctor.builders import GPU_TAINT, node, pod


@pytest.mark.parametrize(
    ("text", "value"),
    [("1", 1), ("0.5", 0.5), ("500m", 0.5), ("2k", 2000), ("1Ki", 1024), ("x", None), ("", None)],
)
def test_quantities_read_like_kubernetes(text: str, value: float | None) -> None:
    parsed = facts.quantity(text)
    assert (None if parsed is None else float(parsed)) == value


@pytest.mark.parametrize(
    ("text", "written"),
    [("0.5", "500m"), ("500m", "500m"), ("1.5", "1500m"), ("0.0005", "1m"), ("2000m", "2"),
     ("1000", "1k"), ("8", "8"), ("1Ki", "1Ki"), ("one", "one")],
)  # fmt: skip
def test_quantities_are_written_back_as_the_api_server_writes_them(text: str, written: str) -> None:
    assert facts.canonical(text) == written


@pytest.mark.parametrize(
    ("amount", "written"), [("0.5", "500m"), ("500m", "500m"), ("1.5", "1500m"), ("one", "one")]
)
def test_fractional_or_unreadable_gpus_are_refused(amount: str, written: str) -> None:
    [found] = admission.check(pod({"nvidia.com/gpu": amount}))
    assert found.layer == "admission" and found.severity == "error"
    assert f'Invalid value: "{written}": must be an integer' in found.evidence[0]


def test_half_a_gpu_is_an_admission_error_even_when_the_pod_runs() -> None:
    """No user can make such a pod: kube-apiserver refuses it at create (and a Deployment whose
    template asks for it), so no controller's FailedCreate tells of it either. Doctor still
    explains one that reached a cluster another way, in the words the server uses."""
    half = pod({"nvidia.com/gpu": "0.5"}, node="gpu-a", phase="Running")
    found = doctor.diagnose_pod(doctor.PodCase(half, (), (node("gpu-a", 1),)))
    assert doctor.has_errors(found)
    [refused] = [d for d in found if d.layer == "admission"]
    assert refused.message == "container cuda asks for 0.5 nvidia.com/gpu: GPUs are whole devices"
    assert refused.evidence == (  # kube-apiserver 1.37's 422 for such a pod, word for word
        'spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "500m": '
        "must be an integer",
    )
    assert "kubectl gpu share --replicas" in refused.fix


def test_requests_unequal_to_limits_are_refused_in_the_servers_words() -> None:
    uneven = pod({"nvidia.com/gpu": "2"}, requests={"nvidia.com/gpu": "1"})
    [found] = admission.check(uneven)
    assert found.message == "container cuda requests 1 nvidia.com/gpu but limits 2"
    assert found.evidence == (  # kube-apiserver 1.37's 422, word for word
        'spec.containers[0].resources.requests: Invalid value: "1": '
        "must be equal to nvidia.com/gpu limit of 2",
    )
    assert found.fix == "make requests equal to limits, or set only limits[nvidia.com/gpu]"


def test_a_request_without_a_limit_is_refused() -> None:
    [found] = admission.check(pod({}, requests={"nvidia.com/gpu": "1"}))
    assert found.evidence == (  # kube-apiserver 1.37's 422, word for word
        "spec.containers[0].resources.limits: Required value: Limit must be set for non "
        "overcommitable resources",
    )


def test_whole_equal_amounts_pass() -> None:
    assert admission.check(pod({"nvidia.com/gpu": "2"}, requests={"nvidia.com/gpu": "2"})) == []


def test_a_full_quota_warns_and_a_roomy_one_does_not() -> None:
    full = facts.Quota("gpus", {"requests.nvidia.com/gpu": "4"}, {"requests.nvidia.com/gpu": "4"})
    roomy = facts.Quota("more", {"requests.nvidia.com/gpu": "8"}, {"requests.nvidia.com/gpu": "4"})
    [found] = admission.full_quotas([full, roomy], {"nvidia.com/gpu": 1})
    assert found.object == "resourcequota/gpus" and found.severity == "warning"


def test_a_missing_pod_refused_by_quota_is_explained_from_failed_create() -> None:
    message = (
        'Error creating: pods "train-7d9f" is forbidden: exceeded quota: gpus, requested: '
        "requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=4, limited: "
        "requests.nvidia.com/gpu=4"
    )
    event = facts.Event("FailedCreate", message, "Warning", "replicaset-controller", 3)
    [found] = admission.missing_pod("ml", "train-7d9f", [event], [])
    assert found.message.endswith("a ResourceQuota is exceeded")
    assert found.evidence == (f"FailedCreate: {message}",)


@pytest.mark.parametrize(
    ("text", "layer"),
    [
        ("Failed to initialize NVML: Driver/library version mismatch", "driver"),
        ("CUDA driver version is insufficient for CUDA runtime version", "driver"),
        ("nvidia-container-cli: initialization error: load library failed", "runtime"),
        ("RuntimeError: No CUDA-capable device is detected", "runtime"),
        ("Back-off pulling image", None),
    ],
)
def test_messages_name_their_layer(text: str, layer: str | None) -> None:
    assert nodeside.classify(text) == layer


def test_hand_set_visible_devices_is_a_runtime_warning() -> None:
    [hidden] = nodeside.runtime(pod(env={"NVIDIA_VISIBLE_DEVICES": "void"}), [])
    assert hidden.layer == "runtime" and "may hide its GPUs" in hidden.message
    [sneaky] = nodeside.runtime(pod({}, env={"NVIDIA_VISIBLE_DEVICES": "all"}), [])
    assert "sees GPUs it was never allocated" in sneaky.message


def test_a_resource_gone_from_allocatable_after_placement() -> None:
    placed = pod(node="gpu-a", phase="Pending")
    gone = node("gpu-a", capacity={"nvidia.com/gpu": "1"}, allocatable={"nvidia.com/gpu": "0"})
    plugin = nodeside.PluginOnNode(known=False, pod=None)
    [found] = nodeside.kubelet(placed, gone, plugin, [])
    assert found.message == "nvidia.com/gpu fell to 0 on node gpu-a after the pod was placed"


def test_a_missing_plugin_pod_is_named_when_the_plugin_is_known() -> None:
    placed = pod(node="gpu-a", phase="Pending")
    plugin = nodeside.PluginOnNode(True, None, "kube-system", "nvidia-device-plugin-ctr", "name=x")
    [found] = nodeside.kubelet(placed, node("gpu-a", 1), plugin, [])
    assert found.object == "node/gpu-a" and "no device plugin pod runs" in found.message


@pytest.mark.parametrize(
    ("state", "severity"), [("failed", "error"), ("pending", "info"), ("success", None)]
)
def test_mig_states_are_reported(state: str, severity: str | None) -> None:
    labelled = node("gpu-a", 1, labels={"kubectl-gpu.io/mig.state": state}, taints=[GPU_TAINT])
    found = [d for d in health.check([labelled], [], None) if "MIG" in d.message]
    assert [d.severity for d in found] == ([severity] if severity else [])
