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


# Issue 31: the file as NVIDIA's Go reader decodes and reads it. Each case's upstream verdict
# was fed to the oracles first (tests/differential/corpus/ keeps the ones they can judge).
TS4 = "version: v1\n" + SHARED


def _cm(body: str, name: str = "plugin-config") -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n{body}"


def _indented(text: str, spaces: int) -> str:
    return "".join(" " * spaces + line + "\n" for line in text.splitlines())


def test_utf16_files_with_a_bom_are_decoded_as_nvidias_reader_decodes_them() -> None:
    from kubectl_gpu import documents

    for raw in (b"\xff\xfe" + TS4.encode("utf-16-le"), b"\xfe\xff" + TS4.encode("utf-16-be")):
        assert errors(documents.decode(raw)) == []
    assert documents.decode(b"\xef\xbb\xbf" + TS4.encode()) == "\ufeff" + TS4
    with pytest.raises(UnicodeDecodeError) as caught:
        documents.decode(b"\xff\xfe\x00\xd8")  # a lone surrogate: not text
    assert caught.value.start == 2  # the byte's offset in the file, past the BOM


def test_two_boms_say_that_nvidias_reader_runs_another_config() -> None:
    report = validation.validate_text("\ufeff\ufeff" + TS4, "f.yaml")
    [finding] = [f for f in report.findings if f.severity is Severity.ERROR]
    assert finding.code == "yaml.stray-bom" and finding.line == 1
    assert "without its first character (line 2 'sharing:' as 'haring:')" in finding.message
    # a BOM starting a later document: that document is never read, so it does not matter
    assert errors(TS4 + "---\n\ufeffversion: v2\n") == []


def test_the_bare_tag_makes_a_count_a_string_as_nvidias_reader_does() -> None:
    report = validation.validate_text(TS4.replace("replicas: 4", "replicas: ! 4"), "f.yaml")
    [finding] = report.findings
    assert finding.code == "yaml.tag-makes-string" and finding.severity is Severity.ERROR
    assert "makes 4 the string '4'" in finding.message and finding.line == 6
    # where a string is wanted the same tag is only a note, and a local tag keeps the text
    assert errors(TS4.replace("name: gpu", "name: ! gpu")) == []
    assert errors(TS4.replace("name: gpu", "name: !foo gpu")) == []


def test_a_null_device_index_says_it_targets_gpu_0_twice() -> None:
    text = "version: v1\nmig-configs:\n  a:\n  - devices: [0, null]\n    mig-enabled: false\n"
    report = validation.validate_text(text, "f.yaml")
    [finding] = report.findings
    assert finding.code == "mig.null-device-index" and finding.line == 4
    assert "reads it as 0, so this entry targets GPU 0 a second time" in finding.message


def test_a_syntax_error_in_a_document_upstream_never_reads_is_said_so() -> None:
    report = validation.validate_text(TS4 + "---\nversion: [v1\n", "f.yaml")
    [finding] = report.findings
    assert finding.severity is Severity.WARNING and finding.code == "document.ignored"
    assert "not valid YAML" in finding.message and "reads only the first" in finding.message
    # in the first document it is the error it always was
    assert errors("version: [v1\n---\n" + TS4) == ["yaml.syntax"]


def test_a_mig_parted_file_whose_first_document_is_empty_is_read_as_mig_parted() -> None:
    text = "{}\n---\nversion: v1\nmig-configs:\n  a:\n  - devices: all\n    mig-enabled: false\n"
    report = validation.validate_text(text, "f.yaml")
    assert report.documents[0].kind == "mig-config"
    assert "schema.missing-field" in errors(text)  # mig-parted: "unknown version"
    assert errors("{}\n") == []  # alone, `{}` is the device plugin's default config


def test_kubectl_get_configmaps_output_is_validated_key_by_key() -> None:
    good = _cm("data:\n  shared: |\n" + _indented(TS4, 4))
    bad = _cm("data:\n  broken: |\n" + _indented(TS4.replace("replicas: 4", "replicas: 1"), 4))
    listed = "apiVersion: v1\nkind: List\nitems:\n" + "".join(
        "- " + _indented(cm, 2)[2:] for cm in (good, bad)
    )
    report = validation.validate_text(listed, "f.yaml")
    assert dict(report.documents[0].keys) == {
        "0": "configmap",
        "0/shared": "device-plugin-config",
        "1": "configmap",
        "1/broken": "device-plugin-config",
    }
    [finding] = report.findings
    assert finding.code == "sharing.replicas-too-low" and finding.line == 27
    assert finding.pointer == "/items/1/data/broken/sharing/timeSlicing/resources/0/replicas"


def test_a_configmaps_binary_data_is_the_file_the_node_mounts() -> None:
    import base64

    def holding(raw: bytes) -> str:
        return _cm(f"binaryData:\n  shared: {base64.b64encode(raw).decode()}\n")

    assert errors(holding(TS4.encode())) == []
    assert errors(holding(b"\xff\xfe" + TS4.encode("utf-16-le"))) == []
    report = validation.validate_text(holding(TS4.replace("4", "1").encode()), "f.yaml")
    [finding] = report.findings
    assert finding.code == "sharing.replicas-too-low" and finding.line == 6  # the key's line
    assert errors(_cm("binaryData:\n  shared: '%%%'\n")) == ["configmap.bad-binary-data"]


def test_other_objects_beside_a_configmap_are_skipped_with_a_note() -> None:
    deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec: {}\n"
    text = _cm("data:\n  shared: |\n" + _indented(TS4, 4)) + "---\n" + deployment
    report = validation.validate_text(text, "f.yaml")
    assert report.valid
    [note] = report.findings
    assert note.code == "document.skipped" and "Deployment web" in note.message
    assert errors(deployment) == ["document.unrecognised"]  # alone: nothing was validated


def test_a_yaml_1_2_escape_inside_a_configmap_value_is_refused() -> None:
    value = TS4.replace("name: gpu", 'name: "nvidia.com\\/gpu"')
    report = validation.validate_text(_cm("data:\n  shared: |\n" + _indented(value, 4)), "f.yaml")
    [finding] = report.findings
    assert finding.code == "yaml.syntax" and "unknown escape character '/'" in finding.message
    assert finding.line == 11


def test_a_key_the_device_plugin_drops_is_said_to_be_dropped() -> None:
    report = validation.validate_text(TS4.replace("sharing:", "bogus: 1\nsharing:"), "f.yaml")
    [finding] = [f for f in report.findings if f.code == "schema.unknown-field"]
    assert "the device plugin ignores it and starts as if it were not written" in finding.message
    # mig-parted refuses unknown fields ("unexpected field"): no such words there
    mig = "version: v1\nbogus: 1\nmig-configs:\n  off:\n  - devices: all\n    mig-enabled: false\n"
    found = validation.validate_text(mig, "m.yaml").findings
    [other] = [f for f in found if f.code == "schema.unknown-field"]
    assert "ignores it" not in other.message


def test_a_hex_count_keeps_its_base_warning_beside_the_count_error() -> None:
    """Both are said: the count cannot fit, and 0x10 is 16 (not ten): a reader may misread it."""
    mig = (
        "version: v1\nmig-configs:\n  a:\n  - devices: all\n    mig-enabled: true\n"
        "    mig-devices:\n      1g.10gb: 0x10\n"
    )
    said = [(f.severity.value, f.code) for f in validation.validate_text(mig, "m.yaml").findings]
    assert said == [("warning", "yaml.non-decimal-number"), ("error", "mig.count-cannot-fit")]


def test_devices_and_rename_warnings_say_what_the_plugin_does_instead() -> None:
    extra = "      replicas: 4\n      devices: [0]\n      rename: x\n"
    text = TS4.replace("      replicas: 4\n", extra)
    said = {f.path[-1]: f.message for f in validation.validate_text(text, "f.yaml").findings}
    assert "then shares all GPUs anyway" in said["devices"]
    assert "drops it" in said["rename"]
