"""`validate` against NVIDIA's own config code, on thousands of drawn configs.

The device plugin's `api/config/v1` start-up path and mig-parted's `api/spec/v1`, as the
oracles under tests/oracles/ read them (built here by scripts/gobins.py), judge every drawn
file: a file upstream refuses must get an error; a file upstream runs as its author meant must
get none (warnings allowed), bar the deliberate strictness listed in
docs/validate-vs-upstream.md. The number of configs is
KUBECTL_GPU_DIFFERENTIAL_EXAMPLES (default 3000 device-plugin and 1000 mig-parted configs,
each written canonically and in a drawn spelling). Past disagreements are kept in corpus/
and judged on every run (test_past_disagreements_stay_fixed.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kubectl_gpu.sharing import normalise_resource_name
from tests.differential import agreement, configs

BATCH = 20
EXAMPLES = int(os.environ.get("KUBECTL_GPU_DIFFERENTIAL_EXAMPLES", "3000"))
# CI draws the same configs every run (a fixed seed); set this to draw new ones, and
# KUBECTL_GPU_DIFFERENTIAL_SAVE=DIR to keep each disagreement as a file for corpus/.
EXPLORE = os.environ.get("KUBECTL_GPU_DIFFERENTIAL_EXPLORE") == "1"
RUNS = settings(
    max_examples=max(1, EXAMPLES // BATCH),
    deadline=None,
    database=None,
    derandomize=not EXPLORE,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate],  # a failing batch already shows each file
)


def device_plugin_effective(verdict: dict[str, Any]) -> Any:
    return verdict.get("effective")


def device_plugin_normalise(path: tuple[Any, ...], value: Any) -> Any:
    """What the author wrote, in the form the plugin's effective config shows it."""
    if (
        path[-1:] in (("name",), ("rename",))
        and path[:1] == ("sharing",)
        and isinstance(value, str)
    ):
        return normalise_resource_name(value)
    if path == ("version",) and value == "":
        return "v1"  # an empty version is v1 to the plugin (its effective config says so)
    if path == ("flags", "plugin", "deviceListStrategy") and isinstance(value, str):
        return [value]
    if path == ("flags",) and isinstance(value, dict):
        # GFD's own flags: the plugin decodes and type-checks them, then drops the section.
        return {k: v for k, v in value.items() if k != "gfd"}
    return value


def device_plugin_faithful(intent: Any, effective: Any) -> bool:
    return agreement.same(intent, effective, device_plugin_normalise)


def mig_effective(verdict: dict[str, Any]) -> Any:
    """mig-parted's spec; an empty `device-filter` (`device-filter: ~` decodes to "") filters
    nothing, as an absent one, so the two are the same config."""
    spec = verdict.get("spec")
    configs = spec.get("mig-configs") if isinstance(spec, dict) else None
    if not isinstance(configs, dict):
        return spec
    return {
        **spec,
        "mig-configs": {
            name: [
                {k: v for k, v in entry.items() if not (k == "device-filter" and v == "")}
                if isinstance(entry, dict)
                else entry
                for entry in entries
            ]
            if isinstance(entries, list)
            else entries
            for name, entries in configs.items()
        },
    }


def mig_faithful(intent: Any, effective: Any) -> bool:
    return agreement.same(intent, effective, lambda _path, value: value)


def _check(tally: agreement.Tally) -> None:
    shown = "\n\n".join(tally.disagreements[:3])
    assert not tally.disagreements, f"{len(tally.disagreements)} disagreement(s):\n{shown}"


@pytest.mark.timeout(600)
@RUNS
@given(cases=st.lists(configs.device_plugin_cases(), min_size=BATCH, max_size=BATCH))
def test_device_plugin_configs_get_upstreams_verdict(
    device_plugin_oracle: Path, cases: list[configs.Case]
) -> None:
    _check(
        agreement.compare(
            cases,
            device_plugin_oracle,
            "auto",
            device_plugin_effective,
            device_plugin_faithful,
        )
    )


@pytest.mark.timeout(600)
@settings(RUNS, max_examples=max(1, EXAMPLES // 3 // BATCH))
@given(cases=st.lists(configs.mig_cases(), min_size=BATCH, max_size=BATCH))
def test_mig_parted_configs_get_upstreams_verdict(
    mig_parted_oracle: Path, cases: list[configs.Case]
) -> None:
    _check(agreement.compare(cases, mig_parted_oracle, "mig-config", mig_effective, mig_faithful))
