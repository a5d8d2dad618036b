"""Every case of three public YAML corpora reads as NVIDIA's Go reader reads it, or the
difference is a documented, deliberate one.

The corpora (tests/differential/conformance.py): the YAML test suite, PyYAML's own test
inputs and go-yaml's. Each case is read by the device-plugin oracle (sigs.k8s.io/yaml and
go.yaml.in/yaml/v2, as NVIDIA's device plugin and mig-parted read a config file) and by
`validate`'s reading layer: both must accept it with the same data, or both refuse it. A
difference must be a row of the table in docs/validate-vs-upstream.md ("The YAML
conformance corpora"), with its reason; a row whose case now agrees must go.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.differential import conformance

CORPORA = {
    "yts": conformance.suite_cases,
    "pyyaml": conformance.pyyaml_cases,
    "go-yaml": conformance.go_yaml_cases,
}


@pytest.mark.parametrize("corpus", sorted(CORPORA))
def test_each_case_reads_as_nvidia_reads_it_or_is_a_documented_difference(
    corpus: str, device_plugin_oracle: Path
) -> None:
    try:
        cases = CORPORA[corpus]()
    except conformance.Missing as missing:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(missing))
    assert cases, f"the {corpus} corpus holds no cases"
    go = conformance.nvidias(device_plugin_oracle, cases)
    documented = {k: v for k, v in conformance.documented().items() if k.startswith(corpus + ":")}
    undocumented, stale = [], []
    for case, theirs in zip(cases, go, strict=True):
        difference = conformance.differs(theirs, conformance.ours(case.raw))
        if difference and case.id not in documented:
            undocumented.append(f"{case.id}: {difference}\n    {case.raw[:200]!r}")
        if not difference and case.id in documented:
            stale.append(case.id)
    report = os.environ.get("KUBECTL_GPU_CONFORMANCE_REPORT")
    if report:
        with open(report, "a", encoding="utf-8") as out:
            agreeing = len(cases) - len(undocumented) - (len(documented) - len(stale))
            out.write(
                f"{corpus}: {len(cases)} cases, {agreeing} agree, "
                f"{len(documented) - len(stale)} documented differences\n"
            )
    assert not undocumented, "differences from NVIDIA's reader not in the table:\n" + "\n".join(
        undocumented
    )
    assert not stale, f"documented differences that now agree (remove their rows): {stale}"


def test_what_validate_says_nvidia_reads_after_a_stray_bom_is_what_it_reads(
    device_plugin_oracle: Path,
) -> None:
    """The `yaml.stray-bom` message states Go's reading; the oracle's must match it."""
    from kubectl_gpu import validation

    two = "\ufeff\ufeffversion: v1\nsharing:\n  timeSlicing:\n    resources: []\n"
    later = "version: v1\nsharing:\n\ufeff  timeSlicing:\n    resources: []\n"
    go = conformance.nvidias(
        device_plugin_oracle,
        [conformance.Case("two", two.encode()), conformance.Case("later", later.encode())],
    )
    assert go[0].data == {"version": "v1", "haring": {"timeSlicing": {"resources": []}}}
    assert go[1].data == {
        "version": "v1",
        "sharing": None,
        "\ufeff  timeSlicing": {"resources": []},
    }
    said = [
        next(
            f.message
            for f in validation.validate_text(t, "f.yaml").findings
            if f.code == "yaml.stray-bom"
        )
        for t in (two, later)
    ]
    assert "line 2 'sharing:' as 'haring:'" in said[0]
    assert "top-level key '\\ufeff  timeSlicing'" in said[1]
