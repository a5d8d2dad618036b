"""When a layout does not fit a GPU model, the error names the profile and says why; when it
fits, compute-instance profiles share GPU instances as mig-parted shares them."""

from __future__ import annotations

import pytest

from kubectl_gpu.errors import GpuError
from kubectl_gpu.mig import fit, models, profiles
from kubectl_gpu.mig.fit import MigFitError

H100 = models.find("H100-80GB")[0]
A30 = models.find("A30")[0]
RTX = models.find("RTX-PRO-6000")[0]


def layout(model: models.GpuModel, **counts: int) -> fit.Layout:
    return fit.layout(model, [(profiles.parse(k.replace("_", ".")), n) for k, n in counts.items()])


def devices(*pairs: tuple[str, int]) -> list[tuple[profiles.MigProfile, int]]:
    return [(profiles.parse(name), n) for name, n in pairs]


def refusal(model: models.GpuModel, *pairs: tuple[str, int]) -> MigFitError:
    with pytest.raises(MigFitError) as raised:
        fit.layout(model, devices(*pairs))
    return raised.value


def test_an_unknown_profile_lists_the_models_profiles() -> None:
    e = refusal(H100, ("1g.5gb", 7))
    assert (e.reason, e.profile) == (fit.UNKNOWN_PROFILE, "1g.5gb")
    assert e.message == (
        "profile 1g.5gb does not exist on NVIDIA H100 80GB HBM3 (its profiles: 1g.10gb, "
        "1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)"
    )
    assert "kubectl gpu mig profiles --gpu H100-80GB" in e.hint


def test_a_compute_instance_profile_names_its_missing_gpu_instance() -> None:
    e = refusal(H100, ("1c.3g.20gb", 1))
    assert e.profile == "1c.3g.20gb"
    assert "it has no 3g.20gb GPU instance" in e.message


def test_the_instance_cap_is_named() -> None:
    e = refusal(H100, ("3g.40gb", 3))
    assert (e.reason, e.profile) == (fit.TOO_MANY, "3g.40gb")
    assert "allows at most 2 3g.40gb GPU instance(s) per GPU, and this spec needs 3" in e.message


def test_only_one_media_extension_instance_per_gpu() -> None:
    e = refusal(A30, ("1g.6gb+me", 1), ("2g.12gb+me", 1))
    assert e.reason == fit.MEDIA_EXTENSIONS
    assert "asks for 2 (2g.12gb+me, 1g.6gb+me)" in e.message
    e = refusal(RTX, ("1g.24gb+me", 1), ("2g.48gb+me.all", 1))
    assert e.reason == fit.MEDIA_EXTENSIONS


def test_no_free_placement_says_what_is_taken_and_what_was_needed() -> None:
    e = refusal(H100, ("4g.40gb", 1), ("2g.20gb", 2))
    assert (e.reason, e.profile) == (fit.NO_PLACEMENT, "2g.20gb")
    assert e.message == (
        "no free placement for 2g.20gb on NVIDIA H100 80GB HBM3: with 4g.40gb@0:4 and "
        "2g.20gb@4:2 placed, memory slices 6 and 7 are free, and 2g.20gb needs one of {0,2,4}:2"
    )


def test_too_many_slices_in_total_are_counted() -> None:
    e = refusal(H100, ("3g.40gb", 2), ("1g.10gb", 1))
    assert "the layout asks for 9 of 8 memory slices" in e.message


def test_a_fit_error_is_a_gpu_error_the_cli_reports() -> None:
    assert issubclass(MigFitError, GpuError)


def test_placements_are_explicit_and_largest_first() -> None:
    placed = layout(H100, **{"1g_10gb": 2, "2g_20gb": 1, "3g_40gb": 1})
    assert [str(p) for p in placed] == ["3g.40gb@4:4", "2g.20gb@0:2", "1g.10gb@2:1", "1g.10gb@3:1"]


def test_4g_and_3g_fit_together_with_placements() -> None:
    # mig-parted#29: "Insufficient Resources" for 3g.40gb + 4g.40gb without placements.
    placed = layout(H100, **{"3g_40gb": 1, "4g_40gb": 1})
    assert sorted((p.profile.name, str(p.placement)) for p in placed) == [
        ("3g.40gb", "4:4"),
        ("4g.40gb", "0:4"),
    ]


def test_compute_instances_of_one_gpu_instance_share_it() -> None:
    one = fit.requests(H100, devices(("1c.3g.40gb", 3)))
    assert [(r.profile.name, len(r.compute_instances)) for r in one] == [("3g.40gb", 3)]
    two = fit.requests(H100, devices(("1c.3g.40gb", 6)))
    assert [len(r.compute_instances) for r in two] == [3, 3]
    mixed = fit.requests(H100, devices(("1c.3g.40gb", 1), ("2c.3g.40gb", 1)))
    assert [[d.name for d in r.compute_instances] for r in mixed] == [["2c.3g.40gb", "1c.3g.40gb"]]


def test_a_whole_gpu_instance_is_never_shared() -> None:
    wanted = fit.requests(H100, devices(("3g.40gb", 1), ("1c.3g.40gb", 2)))
    assert [[d.name for d in r.compute_instances] for r in wanted] == [
        ["3g.40gb"],
        ["1c.3g.40gb", "1c.3g.40gb"],
    ]


def test_compute_instances_that_need_three_gpu_instances_hit_the_cap() -> None:
    e = refusal(H100, ("2c.3g.40gb", 3))
    assert e.reason == fit.TOO_MANY and "needs 3" in e.message


def test_an_empty_layout_fits() -> None:
    assert fit.layout(H100, []) == ()
