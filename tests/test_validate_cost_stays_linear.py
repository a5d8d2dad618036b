"""Inputs that used to take quadratic time or exponential memory: each now ends (well inside
the suite's 30 s per-test timeout, which is what fails if one regresses) with every finding
in place. Timings are measured by benchmarks/validate_scale.py, not asserted here."""

from __future__ import annotations

from kubectl_gpu import documents, validation


def _configmap(keys: int) -> str:
    values = "".join(
        f"  cfg-{i}: |-\n    version: v1\n    flags: {{bad{i}: 1}}\n" for i in range(keys)
    )
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n{values}"


def test_a_10k_key_configmap_locates_every_finding_on_its_own_line() -> None:
    report = validation.validate_text(_configmap(10_000), "cm.yaml")

    unknown = [f for f in report.findings if "bad" in f.message]
    assert len(unknown) == 10_000
    assert {f.line for f in unknown} == {8 + 3 * i for i in range(10_000)}


def test_20k_unknown_keys_are_each_reported_at_their_line() -> None:
    text = "version: v1\nflags:\n" + "".join(f"  k{i}: {i}\n" for i in range(20_000))

    report = validation.validate_text(text, "f.yaml")

    unknown = [f for f in report.findings if f.code == "schema.unknown-field"]
    assert [f.line for f in unknown] == list(range(3, 20_003))


def test_a_merge_key_bomb_is_refused_before_it_expands() -> None:
    levels = ["l0: &l0 {a: 1}"] + [
        f"l{i}: &l{i}\n  <<: [*l{i - 1}, *l{i - 1}]" for i in range(1, 40)
    ]
    text = "\n".join(levels) + "\n"  # under 1 KB; 2**39 pairs once expanded

    report = validation.validate_text(text, "bomb.yaml")

    assert [f.code for f in report.findings] == ["yaml.too-complex"]
    assert f"more than {documents.MAX_NODES} values" in report.findings[0].message


def test_a_million_documents_stop_at_the_cap_with_a_finding() -> None:
    report = validation.validate_text("---\n" * 1_000_000, "many.yaml")

    assert len(report.documents) == documents.MAX_DOCUMENTS
    ignored, finding = report.findings  # the second document is said once to be ignored
    assert ignored.code == "document.ignored"
    assert finding.code == "yaml.too-many-documents" and finding.file == "many.yaml"
    assert finding.line is not None and finding.line > documents.MAX_DOCUMENTS
