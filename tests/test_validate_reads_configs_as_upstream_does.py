"""Every disagreement with NVIDIA's own config code named in issue 14, pinned as one case each:
`validate` never calls a crashing config valid, never cries wolf on a config that works as
written, and its messages say what upstream actually does."""

from __future__ import annotations

import pathlib
import re

import pytest

from kubectl_gpu import validation
from kubectl_gpu.findings import Severity

ROOT = pathlib.Path(__file__).resolve().parents[1]
HELM = sorted((ROOT / "examples" / "helm").glob("*/*.yaml"))
EXPECT = re.compile(r"^# expect: (\S+) line (\d+)\s*$", re.MULTILINE)
SHARED = "sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 4\n"


def findings(text: str, kind: str = "auto") -> list[tuple[str, str, int | None]]:
    report = validation.validate_text(text, "f.yaml", kind)
    return [(f.severity.value, f.code, f.line) for f in report.findings]


def errors(text: str, kind: str = "auto") -> list[str]:
    return [code for severity, code, _ in findings(text, kind) if severity == "error"]


def test_replicas_beyond_go_int_is_an_error_quoting_upstream() -> None:
    text = SHARED.replace("replicas: 4", "replicas: 9223372036854775808")
    report = validation.validate_text(text, "f.yaml")
    [finding] = [f for f in report.findings if f.severity is Severity.ERROR]
    assert finding.code == "sharing.replicas-out-of-range"
    assert "cannot unmarshal number 9223372036854775808" in finding.message
    assert errors(SHARED.replace("replicas: 4", "replicas: 9223372036854775807")) == []


def test_mig_count_beyond_go_int_is_an_error() -> None:
    text = (
        "version: v1\nmig-configs:\n  a:\n  - devices: all\n    mig-enabled: true\n"
        "    mig-devices: {1g.5gb: 9223372036854775808}\n"
    )
    assert errors(text) == ["mig.count-cannot-fit"]


def test_merge_key_followed_by_an_override_is_not_a_duplicate() -> None:
    text = (
        "sharing:\n  timeSlicing:\n    resources:\n    - &base {name: gpu, replicas: 2}\n"
        "    - <<: *base\n      name: mig-1g.10gb\n      replicas: 4\n"
        "flags:\n  migStrategy: mixed\n"
    )
    assert errors(text) == []
    assert errors("a: 1\na: 2\n") == ["yaml.duplicate-key", "schema.unknown-field"]


def test_a_merged_mapping_reached_twice_through_aliases_has_no_duplicate() -> None:
    text = (
        "imex: &i\n  <<: {required: false}\n  required: true\n"
        "sharing:\n  timeSlicing:\n    resources:\n    - <<: &e {name: gpu, replicas: 2}\n"
        "      replicas: 3\n    - <<: *e\n      name: mig-1g.10gb\n"
    )
    assert "yaml.duplicate-key" not in errors(text)


@pytest.mark.parametrize(
    "text",
    [
        "imex: {channelIDs: null}\n",
        "version: ''\n" + SHARED,
        "version:\n" + SHARED,
        "flags:\n" + SHARED,
        "sharing:\n",
        "sharing:\n  mps:\n",
        "flags:\n  migStrategy: null\n  failOnInitError:\n  mpsRoot: ~\n"
        "  plugin:\n    deviceIDStrategy:\n",
        "flags: {gfd: {sleepInterval: null}}\n" + SHARED,
        SHARED.replace("resources:", "renameByDefault: null\n    resources:"),
    ],
)
def test_nulls_and_empty_sections_are_unset_as_upstream_reads_them(text: str) -> None:
    assert errors(text) == []


@pytest.mark.parametrize(
    "text, code",
    [
        ("sharing:\n  timeSlicing:\n", "sharing.no-resources"),
        (SHARED.replace("replicas: 4", "replicas: null"), "schema.wrong-type"),
        (SHARED + "      devices: null\n", "schema.wrong-type"),
    ],
)
def test_nulls_upstream_refuses_are_still_errors(text: str, code: str) -> None:
    assert code in errors(text)


@pytest.mark.parametrize("word", ["y", "Y", "yes", "on"])
def test_yaml_1_1_true_words_are_true_with_the_same_warning(word: str) -> None:
    text = SHARED.replace("resources:", f"renameByDefault: {word}\n    resources:")
    assert findings(text) == [("warning", "yaml.ambiguous-boolean", 3)]


def test_a_quoted_y_stays_a_string() -> None:
    text = SHARED.replace("resources:", "renameByDefault: 'y'\n    resources:")
    assert errors(text) == ["schema.wrong-type"]


@pytest.mark.parametrize(
    "spelling, replicas_ok", [("1e1", True), ("0o10", True), ("1_0", True), ("1:30", False)]
)
def test_numbers_are_read_as_upstreams_yaml_reads_them(spelling: str, replicas_ok: bool) -> None:
    text = SHARED.replace("replicas: 4", f"replicas: {spelling}")
    assert (errors(text) == []) is replicas_ok


@pytest.mark.parametrize(
    "text, line",
    [
        ("Version: v1\n", 1),
        ("Flags:\n  migStrategy: none\n", 1),
        ("flags:\n  migstrategy: none\n", 2),
        ("SHARING:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 2}]\n", 1),
        ("sharing:\n  timeslicing:\n    resources: [{name: gpu, replicas: 2}]\n", 2),
        ("flags: {mpsRoot: /r}\nsharing:\n  MPS:\n    resources: [{name: gpu, replicas: 2}]\n", 3),
    ],
)
def test_keys_upstream_matches_case_insensitively_warn_with_the_spelling(
    text: str, line: int
) -> None:
    report = validation.validate_text(text, "f.yaml")
    [finding] = report.findings
    assert (finding.severity, finding.code, finding.line) == (
        Severity.WARNING,
        "sharing.key-case",
        line,
    )
    assert finding.hint.startswith("write '")


@pytest.mark.parametrize(
    "text, code, line",
    [
        ("flags:\n  migstrategy: mixed\n  mpsRoot: /r\n"
         "sharing:\n  mps:\n    resources: [{name: gpu, replicas: 2}]\n",
         "sharing.mps-with-mixed-mig", 2),
        ("flags:\n  MIGSTRATEGY: bogus\n", "sharing.unknown-mig-strategy", 2),
        ("IMEX: {channelIDs: [5]}\n", "sharing.imex-channel-ids", 1),
    ],
)  # fmt: skip
def test_a_respelt_key_has_its_value_checked_too(text: str, code: str, line: int) -> None:
    found = findings(text)
    assert ("error", code, line) in found
    assert ("warning", "sharing.key-case", line) in found


def test_case_sensitive_keys_say_upstream_ignores_them() -> None:
    text = SHARED.replace("resources:", "RenameByDefault: true\n    resources:")
    report = validation.validate_text(text, "f.yaml")
    [finding] = report.findings
    assert finding.code == "schema.wrong-case"
    assert "ignores 'RenameByDefault'" in finding.message


def test_a_key_given_in_two_spellings_is_an_error() -> None:
    assert "sharing.key-twice" in errors("flags: {migStrategy: none}\nFlags: {gdsEnabled: true}\n")


def test_mig_parted_file_without_mig_configs_only_warns() -> None:
    assert findings("version: v1\n", "mig-config") == [("warning", "mig.no-configs", 1)]
    assert errors("version: v1\nmig-configs: {}\n", "mig-config") == ["schema.bad-value"]


@pytest.mark.parametrize("field", ["mig-devices", "device-filter", "mig-enabled"])
def test_null_mig_parted_spec_fields_are_unset(field: str) -> None:
    text = "version: v1\nmig-configs:\n  a:\n  - devices: all\n    mig-enabled: false\n"
    assert (
        errors(
            text.replace("mig-enabled: false", "mig-enabled: false\n    " + field + ":").replace(
                "mig-enabled: false\n    mig-enabled:", "mig-enabled:"
            )
        )
        == []
    )


def test_second_document_of_a_raw_config_is_said_to_be_ignored() -> None:
    report = validation.validate_text(SHARED + "---\n" + SHARED, "f.yaml")
    [finding] = report.findings
    assert (finding.code, finding.line, finding.severity) == (
        "document.ignored",
        7,  # where the second document starts
        Severity.WARNING,
    )
    assert "ignores this one" in finding.message


def test_second_document_inside_a_configmap_value_is_said_to_be_ignored() -> None:
    text = 'kind: ConfigMap\napiVersion: v1\ndata:\n  a: "version: v1\\n---\\nversion: v1\\n"\n'
    assert ("warning", "document.ignored", 4) in findings(text)


def test_only_the_first_document_of_a_configmap_value_is_checked_and_placed_in_the_file() -> None:
    text = (
        "kind: ConfigMap\napiVersion: v1\ndata:\n  a: |\n    version: v1\n    flags:\n"
        "      migStrategy: none\n      migStrategy: mixed\n    ---\n    version: v1\n"
        "    sharing: {a: 1, a: 2}\n"
    )
    report = validation.validate_text(text, "cm.yaml")
    # the second document's duplicate key is not reported: upstream never parses it
    assert [(f.code, f.file, f.line, f.column, f.pointer) for f in report.findings] == [
        ("yaml.duplicate-key", "cm.yaml", 8, 7, "/data/a/flags/migStrategy"),
        ("document.ignored", "cm.yaml", 10, 5, "/data/a"),
    ]


def test_helm_chart_values_find_replicas_one_inside_config_map() -> None:
    text = (
        "migStrategy: none\nconfig:\n  map:\n    default: |-\n      version: v1\n"
        "      sharing:\n        timeSlicing:\n          resources:\n"
        "            - name: nvidia.com/gpu\n              replicas: 1\n"
    )
    report = validation.validate_text(text, "values.yaml")
    assert [(f.code, f.line) for f in report.findings] == [("sharing.replicas-too-low", 10)]
    assert report.documents[0].kind == "device-plugin-chart-values"
    assert report.documents[0].keys == (("config.map.default", "device-plugin-config"),)


def test_helm_chart_values_are_not_read_as_a_device_plugin_config() -> None:
    text = "image: {tag: v0.20.0}\nnodeSelector: {}\nconfig:\n  name: my-configs\n"
    assert findings(text) == []


def test_chart_with_both_config_name_and_map_is_an_error() -> None:
    text = "config:\n  name: mine\n  map:\n    a: 'version: v1'\n"
    assert errors(text) == ["helm.two-config-sources"]


@pytest.mark.parametrize("path", HELM, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_helm_example_produces_exactly_its_expected_findings(path: pathlib.Path) -> None:
    text = path.read_text("utf-8")
    report = validation.validate_text(text, str(path))
    expected = {(code, int(line)) for code, line in EXPECT.findall(text)}
    assert {(f.code, f.line) for f in report.findings} == expected
    assert report.valid is (path.parent.name == "valid")


def messages(text: str, kind: str = "auto") -> dict[str, str]:
    report = validation.validate_text(text, "f.yaml", kind)
    return {f.code: f.message for f in report.findings}


def test_a_key_in_two_spellings_says_upstream_merges_both() -> None:
    text = "version: v1\nFlags: {migStrategy: single}\nflags: {failOnInitError: false}\n"
    message = messages(text)["sharing.key-twice"]
    assert "fields are merged" in message and "'flags' wins" in message
    assert "so 'version' wins" in messages("version: V1\nVersion: v1\n")["sharing.key-twice"]


def test_yaml_read_as_go_reads_it_is_explained() -> None:
    named_on = "version: v1\nmig-configs:\n  on:\n  - {devices: all, mig-enabled: false}\n"
    message = messages(named_on, "mig-config")["yaml.key-not-string"]
    assert "read it as true" in message and "apply -c on" in message
    assert "unsupported value" in messages("version: v1\nx: .inf\n")["yaml.not-json"]
    assert "unsupported map key" in messages("version: v1\n~: 1\n")["yaml.null-key"]
    assert errors("version: v1\nflags: {migStrategy: 1}\n") == ["schema.wrong-type"]
