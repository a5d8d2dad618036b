"""The oracles run NVIDIA's imported code; what they restate is the newest release's change.

tests/oracles/device-plugin imports k8s-device-plugin v0.19.3's api/config/v1 and adds what
v0.20.0 changed (its module is refused by the proxy); tests/oracles/dra-driver imports
dra-driver-nvidia-gpu v0.4.1's API and, with `-release v0.5.0`, adds what v0.5.0 changed.
Each restated rule is pinned here against the imported release alone, so a restatement that
stops doing anything (or starts changing what the imported code decides) fails.
docs/validate-vs-upstream.md ("The oracles, built here") lists the rules and their files.
"""

from __future__ import annotations

from pathlib import Path

from tests.differential import oracle

MPS_FOUR = (
    "version: v1\nsharing:\n  mps:\n{extra}    resources:\n    - name: nvidia.com/gpu\n"
    "      replicas: 4\n"
)


def _plugin(program: Path, text: str, release: str) -> dict[str, object]:
    return oracle.verdicts(program, [text], "-release", release)[0]


def test_v0_20_policy_flag_is_read_and_checked_only_by_the_newest_release(
    device_plugin_oracle: Path,
) -> None:
    """flags.go / main.go (v0.20.0): sharedDevicesAllocationPolicy; v0.19.3 ignores the key."""
    bogus = "version: v1\nflags:\n  plugin:\n    sharedDevicesAllocationPolicy: bogus\n"
    packed = bogus.replace("bogus", "packed")
    wrong_type = bogus.replace("bogus", "[packed]")

    assert _plugin(device_plugin_oracle, bogus, "v0.19.3")["accepted"] is True
    newest = _plugin(device_plugin_oracle, bogus, "v0.20.0")
    assert newest["accepted"] is False
    assert "shared-devices-allocation-policy" in str(newest["error"])

    accepted = _plugin(device_plugin_oracle, packed, "v0.20.0")
    assert accepted["accepted"] is True
    effective = accepted["effective"]
    assert isinstance(effective, dict)
    assert effective["flags"]["plugin"]["sharedDevicesAllocationPolicy"] == "packed"
    assert _plugin(device_plugin_oracle, wrong_type, "v0.19.3")["accepted"] is True
    assert _plugin(device_plugin_oracle, wrong_type, "v0.20.0")["stage"] == "load"


def test_v0_20_keeps_an_explicit_false_for_mps_where_v0_19_forces_true(
    device_plugin_oracle: Path,
) -> None:
    """replicas.go / config.go (v0.20.0): failRequestsGreaterThanOne is an optional bool."""
    relaxed = MPS_FOUR.format(extra="    failRequestsGreaterThanOne: false\n")
    plain = MPS_FOUR.format(extra="")

    def fail_flag(text: str, release: str) -> object:
        verdict = _plugin(device_plugin_oracle, text, release)
        assert verdict["accepted"] is True, verdict
        effective = verdict["effective"]
        assert isinstance(effective, dict)
        return effective["sharing"]["mps"].get("failRequestsGreaterThanOne")

    assert fail_flag(relaxed, "v0.19.3") is True
    assert fail_flag(relaxed, "v0.20.0") is False
    assert fail_flag(plain, "v0.20.0") is True


def test_the_imported_config_code_refuses_what_nvidia_refuses(device_plugin_oracle: Path) -> None:
    """NewConfig's own errors (not restated): a version, a replica count, a resource name."""
    for text, words in (
        ("version: v2\n", "unknown version"),
        (MPS_FOUR.format(extra="").replace("4", "1"), "replicas must be >= 2"),
        (MPS_FOUR.format(extra="").replace("nvidia.com/gpu", "nvidia.com/Bad_Name"), "format"),
    ):
        for release in ("v0.19.3", "v0.20.0"):
            verdict = _plugin(device_plugin_oracle, text, release)
            assert verdict["accepted"] is False and words in str(verdict["error"]), verdict


GPU_MPS = (
    "apiVersion: resource.nvidia.com/v1beta1\nkind: GpuConfig\nsharing:\n  strategy: MPS\n"
    "  mpsConfig:\n    multiUser: {value}\n"
)
GATES = ("-gates", "TimeSlicingSettings,MPSSupport")


def test_v0_5_reads_multi_user_that_v0_4_strict_decoding_refuses(dra_driver_oracle: Path) -> None:
    """api/nvidia.com/resource/v1beta1/sharing.go (v0.5.0): MpsConfig.MultiUser *bool."""
    texts = [GPU_MPS.format(value="true"), GPU_MPS.format(value='"yes"')]
    old = oracle.verdicts(dra_driver_oracle, texts, *GATES, "-release", "v0.4.1")
    new = oracle.verdicts(dra_driver_oracle, texts, *GATES, "-release", "v0.5.0")

    assert [v["accepted"] for v in old] == [False, False]
    assert "unknown field" in str(old[0]["error"])
    assert [v["accepted"] for v in new] == [True, False]
    assert new[1]["stage"] == "decode"


def test_the_driver_crashes_on_a_time_slicing_config_without_an_interval(
    dra_driver_oracle: Path,
) -> None:
    """v0.4.1's own Validate dereferences the missing interval: prepare fails (a Go panic)."""
    text = (
        "apiVersion: resource.nvidia.com/v1beta1\nkind: GpuConfig\nsharing:\n"
        "  strategy: TimeSlicing\n  timeSlicingConfig: {}\n"
    )
    verdict = oracle.verdicts(dra_driver_oracle, [text], *GATES)[0]
    assert verdict["accepted"] is False
    assert "nil pointer" in str(verdict["error"])
