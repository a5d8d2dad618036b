"""The product's MIG tables and the NVML stand-in's, written apart from the same reference,
agree on every model both know: IDs, names, profiles, caps, placements and +me exclusivity."""

from __future__ import annotations

import pytest

from kubectl_gpu.mig import models, profiles
from tests.kit.node.libnvml import models as stand_in

WITH_MIG = [m for m in stand_in.MODELS.values() if m.profiles]


@pytest.mark.parametrize("fake", WITH_MIG, ids=lambda m: m.key)
def test_the_model_is_found_by_its_pci_id_and_nvml_name(fake: stand_in.GpuModel) -> None:
    by_id = models.by_pci_id(fake.pci_device_id)
    by_name = models.lookup(fake.name)
    assert by_id is not None and by_name is not None
    assert by_id == by_name
    assert by_id[1].name == fake.name


@pytest.mark.parametrize("fake", WITH_MIG, ids=lambda m: m.key)
def test_every_profile_has_the_same_slices_cap_and_placements(fake: stand_in.GpuModel) -> None:
    found = models.by_pci_id(fake.pci_device_id)
    assert found is not None
    ours = {p.name: p for p in found[0].profiles}
    assert sorted(ours) == sorted(p.name for p in fake.profiles)
    for theirs in fake.profiles:
        mine = ours[theirs.name]
        assert mine.compute_slices == theirs.slice_count, theirs.name
        assert mine.max_instances == theirs.instance_count, theirs.name
        assert [(p.start, p.size) for p in mine.placements] == [
            (p.start, p.size) for p in theirs.placements
        ], theirs.name
        assert mine.media_extensions == theirs.media_extension, theirs.name


@pytest.mark.parametrize("fake", WITH_MIG, ids=lambda m: m.key)
def test_compute_instance_profiles_agree(fake: stand_in.GpuModel) -> None:
    found = models.by_pci_id(fake.pci_device_id)
    assert found is not None
    for theirs in fake.profiles:
        mine = found[0].profile(theirs.name)
        assert mine is not None
        smaller = [
            stand_in.mig_device_profile(theirs, ci.slice_count)
            for ci in stand_in.compute_profiles(theirs)
            if ci.slice_count < theirs.slice_count
        ]
        assert list(mine.compute_instance_profiles) == smaller


def test_a_gpu_without_mig_is_not_a_model_we_know() -> None:
    l4 = stand_in.model("L4")
    assert models.by_pci_id(l4.pci_device_id) is None
    assert models.lookup(l4.name) is None


@pytest.mark.parametrize("model", models.MODELS, ids=lambda m: m.key)
def test_every_profile_name_parses_to_its_own_slices(model: models.GpuModel) -> None:
    for profile in model.profiles:
        parsed = profiles.parse(profile.name)
        assert parsed.name == profile.name
        assert parsed.gpu_slices == parsed.compute_slices == profile.compute_slices
        assert profile.media_extensions == bool({"me", "me.all"} & set(parsed.attributes))
