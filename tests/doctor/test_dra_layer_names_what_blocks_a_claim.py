"""The DRA layer of `doctor`, on plain facts with the real CEL evaluator (kubectl_gpu.cel):
the selector clause no published device satisfies, with the values devices do have; no
NVIDIA slices at all or none on the pod's node; NodePrepareResources errors with the config
that caused them; a sharing strategy whose driver feature gate is off; and a pod asking for a
claim and nvidia.com/gpu where no node is served by both planes. The slices are the stand-in's
plain objects (tests/kit/cluster/drastandin.py); doctor on NVIDIA's own slices and prepare
errors: tests/cli/test_doctor_names_the_dra_layer.py,
tests/cli/test_doctor_names_nvidias_refusal_to_prepare_a_claim.py."""

from __future__ import annotations

from typing import Any

from kubectl_gpu import cel
from kubectl_gpu.doctor import dra, drafacts, facts
from kubectl_gpu.doctor.model import Diagnosis
from tests.doctor import builders as b
from tests.kit.cluster import drastandin
from tests.kit.cluster.drastandin import DraGpu, MigSlot

A100 = "NVIDIA A100-SXM4-80GB"
H100 = "NVIDIA H100 80GB HBM3"
Obj = dict[str, Any]


def slices() -> list[Obj]:
    nodes = {
        "dra-1": [DraGpu(0, "GPU-a0"), DraGpu(1, "GPU-a1")],
        "dra-2": [DraGpu(0, "GPU-b0", migs=(MigSlot("1g.10gb", "MIG-b0", 10, 14),))],
    }
    return [s for n, g in nodes.items() for s in drastandin.resource_slices(n, g, "v1")]


def claim(request: Obj, *, allocated: bool = False, config: list[Obj] | None = None) -> Obj:
    devices: Obj = {"requests": [request]}
    if config:
        devices["config"] = config
    status = {"allocation": {"devices": {"results": []}}} if allocated else {}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "train-gpu", "namespace": "ml"},
        "spec": {"devices": devices},
        "status": status,
    }


def exactly(cls: str = "gpu.nvidia.com", *selectors: str, count: int = 1) -> Obj:
    body: Obj = {"deviceClassName": cls, "count": count}
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": "gpu", "exactly": body}


def case(
    *claims: Obj,
    published: list[Obj] | None = None,
    classes: list[Obj] | None = None,
    gates: dict[str, bool] | None = None,
    taken: dict[tuple[str, str, str], str] | None = None,
) -> dra.DraCase:
    raw_classes = drastandin.device_classes("v1") + (classes or [])
    return dra.DraCase(
        claims=tuple(drafacts.claim_from_dict(c) for c in claims),
        classes={c.name: c for c in map(drafacts.class_from_dict, raw_classes)},
        devices=tuple(
            d
            for s in (slices() if published is None else published)
            for d in drafacts.devices_from_slice(s)
        ),  # fmt: skip
        gates=gates,
        evaluate=cel.matches,
        taken=taken or {},
    )


def check(
    the_case: dra.DraCase,
    pod: facts.Pod | None = None,
    nodes: list[facts.Node] | None = None,
    events: list[facts.Event] | None = None,
) -> list[Diagnosis]:
    subject = pod or b.pod({})
    return dra.check(subject, nodes or [], events or [], the_case)


def test_a_request_selector_no_device_meets_is_named_with_the_values_devices_have() -> None:
    wanted = f"device.attributes['gpu.nvidia.com'].productName == '{H100}'"
    [found] = check(case(claim(exactly("gpu.nvidia.com", wanted))))

    assert (found.layer, found.severity, found.object) == (
        "dra",
        "error",
        "resourceclaim/train-gpu",
    )
    assert "request gpu cannot be allocated" in found.message
    assert f"`{wanted}` (productName)" in found.message
    assert found.evidence[0] == (
        f"gpu.nvidia.com/productName on the 3 published device(s): '{A100}'"
    )


def test_a_device_class_selector_is_named_when_it_is_the_one_unmet() -> None:
    vfio = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "vfio.gpu.nvidia.com"},
        "spec": {"selectors": [{"cel": {"expression": (
            "device.driver == 'gpu.nvidia.com' && "
            "device.attributes['gpu.nvidia.com'].type == 'vfio'")}}]},
    }  # fmt: skip
    [found] = check(case(claim(exactly("vfio.gpu.nvidia.com")), classes=[vfio]))

    assert "DeviceClass vfio.gpu.nvidia.com's selector" in found.message
    assert "device.attributes['gpu.nvidia.com'].type == 'vfio'" in found.message
    assert found.evidence[0].endswith("'gpu', 'mig'")


def test_every_clause_met_alone_but_too_few_devices_together() -> None:
    both = "device.attributes['gpu.nvidia.com'].uuid == 'GPU-a0'"
    [found] = check(case(claim(exactly("gpu.nvidia.com", both, count=2))))

    assert "needs 2 device(s) satisfying every selector together, and 1 do" in found.message


def test_a_selector_reading_a_missing_attribute_reports_the_cel_error() -> None:
    [found] = check(
        case(claim(exactly("gpu.nvidia.com", "device.attributes['gpu.nvidia.com'].numa == 1")))
    )
    assert "'<absent>'" in found.evidence[0]
    assert any("CEL runtime error" in e for e in found.evidence)


def test_a_firstavailable_claim_is_fine_when_one_alternative_fits() -> None:
    request = {
        "name": "gpu",
        "firstAvailable": [
            {"name": "h100", "deviceClassName": "gpu.nvidia.com", "selectors": [
                {"cel": {"expression":
                         f"device.attributes['gpu.nvidia.com'].productName == '{H100}'"}}]},
            {"name": "slice", "deviceClassName": "mig.nvidia.com"},
        ],
    }  # fmt: skip
    assert check(case(claim(request))) == []


def test_no_nvidia_slice_anywhere_says_the_driver_is_not_publishing() -> None:
    [found] = check(case(claim(exactly()), published=[]))
    assert found.message == (
        "request gpu cannot be allocated: no ResourceSlice from gpu.nvidia.com is published"
    )


def test_a_scheduled_pod_on_a_node_without_nvidia_slices_blames_the_node() -> None:
    pod = b.pod({}, node="cpu-1")
    [found] = check(case(claim(exactly(), allocated=True)), pod)

    assert found.object == "node/cpu-1"
    assert "kubelet plugin is not running there" in found.message


def mps_config() -> list[Obj]:
    return [{"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {
        "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
        "sharing": {"strategy": "MPS", "timeSlicingConfig": {"interval": "Long"}}}}}]  # fmt: skip


def test_prepare_errors_in_events_come_with_the_config_that_caused_them() -> None:
    event = facts.Event(
        "FailedPrepareDynamicResources",
        "Failed to prepare dynamic resources: NodePrepareResources failed for claim "
        "ml/train-gpu: error preparing devices: cannot use TimeSlicingConfig with the 'MPS' "
        "strategy",
        "Warning",
        "kubelet",
        3,
    )
    pod = b.pod({}, node="dra-1")
    [found] = check(case(claim(exactly(), allocated=True, config=mps_config())), pod, [], [event])

    assert found.message.startswith("the DRA driver could not prepare the pod's devices:")
    assert any(
        e.startswith("resourceclaim/train-gpu config: cannot use TimeSlicingConfig")
        for e in found.evidence
    )


def test_a_strategy_whose_gate_is_off_is_an_error_naming_the_helm_value() -> None:
    the_case = case(claim(exactly(), allocated=True, config=mps_config()),
                    gates={"TimeSlicingSettings": True})  # fmt: skip
    [found] = check(the_case, b.pod({}, node="dra-1"))

    assert "MPSSupport feature gate off" in found.message
    assert found.fix == "helm upgrade the driver with --set featureGates.MPSSupport=true"
    assert check(case(claim(exactly(), allocated=True, config=mps_config()),
                      gates={"MPSSupport": True}), b.pod({}, node="dra-1")) == []  # fmt: skip


def test_a_claim_and_nvidia_gpu_need_a_node_served_by_both_planes() -> None:
    pod = b.pod({"nvidia.com/gpu": "1"})
    nodes = [b.node("dp-1", 4), b.node("dra-1", 0)]
    the_case = case(claim(exactly()))
    v1beta1_classes = {k: v for k, v in the_case.classes.items()}
    without_mapping = dra.DraCase(
        the_case.claims,
        {k: drafacts.ClassFacts(v.name, v.selectors, v.configs, None)
         for k, v in v1beta1_classes.items()},
        the_case.devices, None, cel.matches,
    )  # fmt: skip

    [found] = [d for d in check(without_mapping, pod, nodes) if d.object == "pod/train"]
    assert "no node is served by both planes" in found.message
    assert found.evidence == (
        "device plugin only: dp-1",
        "DRA only: dra-1 (no DeviceClass maps nvidia.com/gpu to DRA)",
    )
    # The chart's v1 gpu.nvidia.com class maps nvidia.com/gpu to DRA: DRA nodes serve both.
    assert [d for d in check(the_case, pod, nodes) if d.object == "pod/train"] == []


def test_without_a_cel_evaluator_a_pending_claim_is_a_warning_not_a_guess() -> None:
    the_case = case(claim(exactly()))
    blind = dra.DraCase(the_case.claims, the_case.classes, the_case.devices, None, None)
    [found] = check(blind)

    assert found.severity == "warning"
    assert "pip install 'kubectl-gpu[dra]'" in found.fix


HELD = {
    ("gpu.nvidia.com", "dra-1", "gpu-0"): "ml/train-a",
    ("gpu.nvidia.com", "dra-1", "gpu-1"): "ml/train-b",
}


def test_devices_that_match_but_other_claims_hold_are_named_with_their_holders() -> None:
    [found] = check(case(claim(exactly()), taken=HELD))

    assert found.message == (
        "request gpu cannot be allocated: 2 device(s) satisfy its selectors, and other claims "
        "hold 2 of them"
    )
    assert found.evidence == ("gpu-0 on dra-1: ml/train-a", "gpu-1 on dra-1: ml/train-b")
    assert check(case(claim(exactly()), taken=dict(list(HELD.items())[:1]))) == []


def test_a_pending_nvidia_gpu_pod_served_by_dra_is_checked_like_a_claim() -> None:
    pod = b.pod({"nvidia.com/gpu": "1"})
    [found] = check(case(taken=HELD), pod)

    assert found.object == "pod/train"
    assert found.message.startswith(
        "nvidia.com/gpu (DeviceClass gpu.nvidia.com serves it through DRA) cannot be allocated"
    )
    assert check(case(), pod) == []


def plugin_daemonset(env: list[Obj], args: list[str] | None = None) -> Obj:
    container = {
        "name": "gpus",
        "image": "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v25.12.0",
        "env": env,
    }  # noqa: E501
    if args:
        container["args"] = args
    return {"spec": {"template": {"spec": {"containers": [container]}}}}


def test_feature_gates_are_read_as_the_chart_passes_them() -> None:
    chart = plugin_daemonset(
        [{"name": "FEATURE_GATES", "value": "MPSSupport=true,TimeSlicingSettings=false,"}]
    )  # noqa: E501
    assert drafacts.feature_gates([{"spec": {}}, chart]) == {
        "MPSSupport": True,
        "TimeSlicingSettings": False,
    }
    flags = plugin_daemonset([], ["--feature-gates=TimeSlicingSettings=true"])
    assert drafacts.feature_gates([flags]) == {"TimeSlicingSettings": True}
    assert drafacts.feature_gates([plugin_daemonset([])]) == {}  # chart default: every gate off
    assert drafacts.feature_gates([{"spec": {}}]) is None  # no driver found: unknown


def test_a_driver_not_registered_with_kubelet_is_named_as_such() -> None:
    event = facts.Event(
        "FailedPrepareDynamicResources",
        "Failed to prepare dynamic resources: DRA driver gpu.nvidia.com is not registered",
        "Warning",
        "kubelet",
        1,
    )
    pod = b.pod({}, node="dra-1")
    [found] = check(case(claim(exactly(), allocated=True)), pod, [], [event])

    assert found.message.startswith("the DRA driver's kubelet plugin is not registered")
    assert found.evidence[0].endswith("DRA driver gpu.nvidia.com is not registered")
