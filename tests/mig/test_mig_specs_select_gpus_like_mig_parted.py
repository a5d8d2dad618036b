"""Which spec applies to which GPU of a node, as mig-parted walks a config (docs/upstream-facts.md
M1.3), and what that means for each GPU's verdict."""

from __future__ import annotations

from typing import Any

import pytest

from kubectl_gpu.errors import ExitCode, GpuError
from kubectl_gpu.mig import models, nodes, verdicts
from kubectl_gpu.mig.models import UnknownGpuModelError
from kubectl_gpu.mig.nodes import NodeGpu, Target
from kubectl_gpu.mig.spec import MigConfigFile, MigDeviceSpec
from kubectl_gpu.mig.verdicts import Status

A100_40, A100_80 = models.find("A100-40GB")[0], models.find("A100-80GB")[0]


def specs(*entries: dict[str, Any]) -> tuple[MigDeviceSpec, ...]:
    doc = {"version": "v1", "mig-configs": {"c": list(entries)}}
    return MigConfigFile.from_dict(doc).select("c")


def enabled(devices: Any, layout: dict[str, int], **extra: Any) -> dict[str, Any]:
    return {"devices": devices, "mig-enabled": True, "mig-devices": layout, **extra}


def gpu(index: int, model: models.GpuModel | None = A100_40, **kw: Any) -> NodeGpu:
    pci = kw.pop("pci", model.products[0].pci_device_id if model else 0x1FB010DE)
    return NodeGpu(index, pci, model.name if model else "display GPU", model, **kw)


def check(config: tuple[MigDeviceSpec, ...], *gpus: NodeGpu, strategy: str | None = None) -> Any:
    return verdicts.check("c", config, Target("node", gpus), strategy)


def test_the_last_spec_that_selects_a_gpu_wins() -> None:
    config = specs(enabled("all", {"1g.5gb": 7}), enabled([1], {"7g.40gb": 1}))
    result = check(config, gpu(0), gpu(1))
    assert [(v.spec, [p.profile.name for p in v.layout][:1]) for v in result.gpus] == [
        (0, ["1g.5gb"]),
        (1, ["7g.40gb"]),
    ]
    assert result.fits


def test_an_earlier_spec_that_cannot_apply_fails_the_gpu() -> None:
    config = specs(enabled("all", {"3g.20gb": 2, "1g.5gb": 1}), enabled("all", {"1g.5gb": 7}))
    (verdict,) = check(config, gpu(0)).gpus
    assert verdict.status is Status.DOES_NOT_FIT
    assert verdict.problem.startswith(
        "spec #1, which mig-parted applies before spec #2: no free placement for 1g.5gb"
    )


def test_a_device_filter_selects_only_its_model() -> None:
    config = specs(enabled("all", {"3g.20gb": 2}, **{"device-filter": "0x20B010DE"}))
    result = check(config, gpu(0), gpu(1, A100_80))
    assert [v.status for v in result.gpus] == [Status.FITS, Status.NOT_COVERED]
    assert "no spec selects this GPU" in result.gpus[1].problem
    assert not result.fits


def test_a_filter_with_a_subsystem_needs_the_gpus_subsystem() -> None:
    config = specs(enabled("all", {"7g.40gb": 1}, **{"device-filter": "0x20B010DE:0x134F10DE"}))
    assert check(config, gpu(0)).gpus[0].status is Status.NOT_COVERED
    assert check(config, gpu(0, subsystem_id=0x134F10DE)).gpus[0].status is Status.FITS


def test_a_gpu_missing_from_devices_is_not_covered_and_extra_indices_are_ignored() -> None:
    config = specs(enabled([0, 5], {"7g.40gb": 1}))
    result = check(config, gpu(0), gpu(1))
    assert [v.status for v in result.gpus] == [Status.FITS, Status.NOT_COVERED]


def test_a_non_mig_gpu_is_skipped_under_devices_all() -> None:
    config = specs(enabled("all", {"7g.40gb": 1}))
    result = check(config, gpu(0), gpu(1, None, mig_capable=False))
    assert [v.status for v in result.gpus] == [Status.FITS, Status.SKIPPED]
    assert result.fits
    assert result.resources == {"nvidia.com/gpu": 1, "nvidia.com/mig-7g.40gb": 1}


def test_a_non_mig_gpu_listed_with_mig_enabled_is_refused() -> None:
    config = specs(enabled([0, 1], {"7g.40gb": 1}))
    verdict = check(config, gpu(0), gpu(1, None, mig_capable=False)).gpus[1]
    assert verdict.status is Status.DOES_NOT_FIT
    assert verdict.problem == "spec #1: cannot set MIG config on non MIG-capable GPU"


def test_a_non_mig_gpu_with_mig_disabled_fits() -> None:
    config = specs(
        enabled([0], {"7g.40gb": 1}),
        {"devices": [1], "mig-enabled": False, "device-filter": "0x1FB010DE"},
    )
    result = check(config, gpu(0), gpu(1, None, mig_capable=False))
    assert [(v.status, v.mig_enabled) for v in result.gpus] == [
        (Status.FITS, True),
        (Status.FITS, False),
    ]


def test_a_mig_gpu_of_unknown_geometry_cannot_take_instances() -> None:
    stranger = NodeGpu(0, 0x12345678, "NVIDIA Future GPU", None)
    (verdict,) = check(specs(enabled("all", {"1g.10gb": 1})), stranger).gpus
    assert verdict.problem == "no MIG geometry is known for NVIDIA Future GPU (0x12345678)"
    (verdict,) = check(specs({"devices": "all", "mig-enabled": False}), stranger).gpus
    assert verdict.status is Status.FITS


# --- targets ---------------------------------------------------------------------------------


def test_a_model_target_has_count_gpus_with_the_named_products_id() -> None:
    target = nodes.model_target("NVIDIA A800 40GB Active", 2)
    assert [(g.index, g.pci_id, g.model) for g in target.gpus] == [
        (0, "0x20F610DE", A100_40),
        (1, "0x20F610DE", A100_40),
    ]


def test_an_unknown_model_is_a_usage_error_listing_the_known_ones() -> None:
    with pytest.raises(UnknownGpuModelError) as raised:
        nodes.model_target("Tesla T4")
    assert raised.value.exit_code is ExitCode.USAGE
    assert "NVIDIA H100 80GB HBM3" in raised.value.hint
    assert "H100-80GB" in raised.value.hint


LABELS = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"}


def test_a_node_target_reads_gfd_product_and_count() -> None:
    target = nodes.node_target("n1", LABELS)
    assert (target.name, target.node, len(target.gpus)) == ("n1", "n1", 8)
    assert {g.model.key for g in target.gpus if g.model} == {"H100-80GB"}


def test_a_time_sliced_product_label_still_names_the_model() -> None:
    labels = {**LABELS, "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED"}
    assert nodes.node_target("n1", labels).gpus[0].pci_id == "0x233010DE"


@pytest.mark.parametrize(
    ("labels", "words"),
    [
        ({}, "has no nvidia.com/gpu.product label"),
        ({**LABELS, "nvidia.com/gpu.product": "Tesla-T4"}, "not a MIG-capable model"),
        (
            {**LABELS, "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"},
            "counts MIG devices, not GPUs",
        ),
        ({**LABELS, "nvidia.com/gpu.count": "lots"}, "no usable nvidia.com/gpu.count"),
    ],
)
def test_a_node_whose_labels_do_not_say_is_an_error(labels: dict[str, str], words: str) -> None:
    with pytest.raises(GpuError) as raised:
        nodes.node_target("n1", labels)
    assert words in raised.value.message
    assert raised.value.exit_code is ExitCode.ERROR


# --- the device plugin's MIG strategy --------------------------------------------------------


def test_single_needs_one_profile_node_wide() -> None:
    result = check(specs(enabled("all", {"1g.5gb": 2, "2g.10gb": 1})), gpu(0), strategy="single")
    assert result.problems == (
        "the device plugin (migStrategy single) would refuse the node: invalid MIG "
        "configuration: more than one MIG device type present on node (1g.5gb, 2g.10gb)",
    )
    assert not result.fits


def test_single_needs_the_same_mode_on_every_gpu() -> None:
    config = specs(enabled([0], {"7g.40gb": 1}), {"devices": [1], "mig-enabled": False})
    result = check(config, gpu(0), gpu(1), strategy="single")
    assert any("same migEnabled value" in p for p in result.problems)


def test_single_needs_a_mig_device_on_every_mig_gpu() -> None:
    result = check(specs(enabled("all", {})), gpu(0), strategy="single")
    assert any("device 0 has no MIG devices configured" in p for p in result.problems)


def test_single_advertises_every_mig_device_as_a_gpu() -> None:
    result = check(specs(enabled("all", {"1g.5gb": 7})), gpu(0), gpu(1), strategy="single")
    assert result.fits
    assert result.resources == {"nvidia.com/gpu": 14}


def test_mixed_counts_compute_instance_profiles_under_their_gpu_instance() -> None:
    # as NVIDIA's device plugin v0.19.3 advertised them on a simulated node
    # (tests/harness/test_sim_device_plugin_advertises_mig_per_strategy.py)
    result = check(specs(enabled("all", {"1c.3g.20gb": 3})), gpu(0), strategy="mixed")
    assert result.fits and not result.problems
    assert result.resources == {"nvidia.com/mig-3g.20gb": 3}


def test_mixed_advertises_one_resource_per_profile() -> None:
    layout = {"1g.10gb+me": 1, "1g.10gb": 1, "2g.20gb": 1, "3g.40gb": 1}
    result = check(specs(enabled("all", layout)), gpu(0, A100_80), strategy="mixed")
    assert result.fits
    # v0.19.3 matches "1g.10gb+me" with the resource pattern "1g.10gb", which comes first
    assert result.resources == {
        "nvidia.com/mig-1g.10gb": 2,
        "nvidia.com/mig-2g.20gb": 1,
        "nvidia.com/mig-3g.40gb": 1,
    }
