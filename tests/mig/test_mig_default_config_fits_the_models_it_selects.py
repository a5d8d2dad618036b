"""NVIDIA's default MIG config, unchanged: each name fits the GPU models it was written for.

The expected fits are transcribed from docs/upstream-facts.md M3.5 (which GPU each name is for) by
hand. A config with a device-filter applies only to the PCI IDs it lists: other GPUs are not
covered. An unfiltered per-model config (e.g. all-1g.5gb) selects every GPU and fits only where
its profiles exist; everywhere else the verdict names the missing profile.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubectl_gpu.mig import models, nodes, verdicts
from kubectl_gpu.mig.spec import MigConfigFile
from kubectl_gpu.mig.verdicts import Status

DATA = Path(__file__).resolve().parent.parent / "data" / "mig"
DEFAULT = DATA / "mig-parted__deployments__systemd__config-default.yaml"
OPERATOR = DATA / "gpu-operator__assets__state-mig-manager__0400_configmap__config.yaml"

EVERY = {m.key for m in models.MODELS}
A100_80 = {"A100-80GB", "H100-80GB"}
RTX = {"RTX-PRO-6000"}
FITS: dict[str, set[str]] = {
    "all-disabled": EVERY,
    "all-enabled": EVERY,
    "all-balanced": EVERY,
    **dict.fromkeys(
        ["all-1g.5gb", "all-1g.5gb.me", "all-2g.10gb", "all-3g.20gb", "all-4g.20gb"],
        {"A100-40GB"},
    ),
    "all-7g.40gb": {"A100-40GB"},
    "all-1g.10gb": {"A100-40GB", *A100_80},  # filtered: 4 on 40GB boards, 7 on 80GB boards
    **dict.fromkeys(
        ["all-1g.10gb.me", "all-1g.20gb", "all-2g.20gb", "all-3g.40gb", "all-4g.40gb"], A100_80
    ),
    "all-7g.80gb": A100_80,
    **dict.fromkeys(
        ["all-1g.6gb", "all-1g.6gb.me", "all-2g.12gb", "all-2g.12gb.me", "all-4g.24gb"], {"A30"}
    ),
    "all-1g.12gb": {"H100-94GB", "H100-96GB"},
    "all-1g.12gb.me": {"H100-94GB"},  # the 96GB board has no +me profile
    "all-1g.24gb": {"H100-94GB", "H100-96GB", *RTX},
    "all-2g.24gb": {"H100-94GB", "H100-96GB"},
    "all-1g.24gb.me": RTX,
    **dict.fromkeys(["all-3g.47gb", "all-4g.47gb", "all-7g.94gb"], {"H100-94GB"}),
    **dict.fromkeys(["all-3g.48gb", "all-4g.48gb", "all-7g.96gb"], {"H100-96GB"}),
    **dict.fromkeys(
        ["all-1g.47gb", "all-2g.47gb", "all-3g.93gb", "all-4g.93gb", "all-7g.186gb"], {"GB200"}
    ),
    **dict.fromkeys(["all-1g.18gb", "all-1g.18gb.me"], {"H200-141GB", "GH200-144GB"}),
    **dict.fromkeys(["all-1g.23gb", "all-1g.23gb.me"], {"B200", "GB200"}),
    "all-1g.35gb": {"H200-141GB", "GB300"},  # filtered to 0x233510DE and 0x31C210DE
    **dict.fromkeys(["all-2g.35gb", "all-3g.71gb", "all-4g.71gb", "all-7g.141gb"], {"H200-141GB"}),
    **dict.fromkeys(
        ["all-1g.36gb", "all-2g.36gb", "all-3g.72gb", "all-4g.72gb", "all-7g.144gb"],
        {"GH200-144GB"},
    ),
    **dict.fromkeys(
        ["all-1g.45gb", "all-2g.45gb", "all-3g.90gb", "all-4g.90gb", "all-7g.180gb"], {"B200"}
    ),
    **dict.fromkeys(
        [
            "all-1g.34gb",
            "all-1g.34gb.me",
            "all-1g.67gb",
            "all-2g.67gb",
            "all-3g.135gb",
            "all-4g.135gb",
            "all-7g.269gb",
        ],
        {"B300"},
    ),
    **dict.fromkeys(
        [
            "all-1g.35gb.me",
            "all-1g.70gb",
            "all-2g.70gb",
            "all-3g.139gb",
            "all-4g.139gb",
            "all-7g.278gb",
        ],
        {"GB300"},
    ),
    **dict.fromkeys(
        [
            "all-1g.24gb.gfx",
            "all-1g.24gb.me.all",
            "all-1g.24gb-me",
            "all-2g.48gb",
            "all-2g.48gb.gfx",
            "all-2g.48gb.me.all",
            "all-2g.48gb-me",
            "all-4g.96gb",
            "all-4g.96gb.gfx",
        ],
        RTX,
    ),
    # 3g.95gb, 4g.95gb and 7g.189gb belong to a board docs/upstream-facts.md does not describe.
    **dict.fromkeys(["all-3g.95gb", "all-4g.95gb", "all-7g.189gb"], set()),
}


@pytest.fixture(scope="module")
def default_config() -> MigConfigFile:
    return MigConfigFile.from_dict(yaml.safe_load(DEFAULT.read_text()))


@pytest.fixture(scope="module")
def results(default_config: MigConfigFile) -> dict[tuple[str, str], verdicts.ConfigVerdict]:
    """Every (config, PCI ID) pair: each known product as a one-GPU node."""
    targets = [nodes.model_target(product.pci_id) for m in models.MODELS for product in m.products]
    checked = verdicts.check_file(default_config, default_config.names, targets)
    return {(v.config, v.target.name): v for v in checked}


def test_the_expectations_cover_every_name_in_the_file(default_config: MigConfigFile) -> None:
    assert sorted(FITS) == sorted(default_config.names)
    assert len(FITS) == 81


def test_the_operators_copy_has_the_same_names_and_its_all_balanced_fits_every_model(
    default_config: MigConfigFile,
) -> None:
    operator = MigConfigFile.from_dict(yaml.safe_load(OPERATOR.read_text()))
    assert sorted(operator.names) == sorted(default_config.names)
    targets = [nodes.model_target(m.key) for m in models.MODELS]
    checked = verdicts.check_file(operator, ["all-balanced"], targets)
    assert [v.target.name for v in checked if not v.fits] == []


@pytest.mark.parametrize("name", sorted(FITS))
def test_each_config_fits_exactly_the_models_it_is_for(
    name: str, results: dict[tuple[str, str], verdicts.ConfigVerdict]
) -> None:
    fitting = {v.target.name for (config, _), v in results.items() if config == name and v.fits}
    expected = {p.pci_id for m in models.MODELS if m.key in FITS[name] for p in m.products}
    if name == "all-1g.35gb":  # the filter names the H200 SXM only, not the H200 NVL
        expected.discard("0x233B10DE")
    assert fitting == expected


def test_a_filtered_config_leaves_other_models_uncovered(
    results: dict[tuple[str, str], verdicts.ConfigVerdict],
) -> None:
    (gpu,) = results[("all-1g.35gb", "0x233B10DE")].gpus
    assert gpu.status is Status.NOT_COVERED
    (gpu,) = results[("all-1g.10gb", "0x233510DE")].gpus
    assert gpu.status is Status.NOT_COVERED


def test_a_config_for_another_model_names_the_missing_profile(
    results: dict[tuple[str, str], verdicts.ConfigVerdict],
) -> None:
    (gpu,) = results[("all-1g.5gb", "0x233010DE")].gpus
    assert gpu.status is Status.DOES_NOT_FIT
    assert gpu.problem.startswith(
        "profile 1g.5gb does not exist on NVIDIA H100 80GB HBM3 (its profiles: 1g.10gb, "
    )


def test_all_balanced_gets_the_guides_3_2_1_1_geometry(
    results: dict[tuple[str, str], verdicts.ConfigVerdict],
) -> None:
    (gpu,) = results[("all-balanced", "0x20B010DE")].gpus
    placed = sorted((p.placement.start, p.placement.size, p.profile.name) for p in gpu.layout)
    assert placed == [(0, 2, "2g.10gb"), (2, 1, "1g.5gb"), (3, 1, "1g.5gb"), (4, 4, "3g.20gb")]
