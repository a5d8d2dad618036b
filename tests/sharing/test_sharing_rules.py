"""Every semantic rule of the device-plugin config: the failing input, its code, path, severity
and, where upstream has one, the exact upstream message."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kubectl_gpu import sharing
from kubectl_gpu.findings import Finding, Severity

E, W = Severity.ERROR, Severity.WARNING
TS = ("sharing", "timeSlicing")
MPS = ("sharing", "mps")
DNS1123 = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def gpu(replicas: Any = 4, **extra: Any) -> dict[str, Any]:
    return {"name": "nvidia.com/gpu", "replicas": replicas, **extra}


def time_slicing(*entries: dict[str, Any], flags: Any = None, **block: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"version": "v1", "sharing": {"timeSlicing": {**block}}}
    if entries:
        doc["sharing"]["timeSlicing"]["resources"] = list(entries)
    if flags is not None:
        doc["flags"] = flags
    return doc


def mps(*entries: dict[str, Any], flags: Any = None, **block: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "version": "v1",
        "flags": {"mpsRoot": "/run/nvidia/mps", **(flags or {})},
        "sharing": {"mps": {"resources": list(entries), **block}},
    }
    return doc


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    doc: dict[str, Any]
    code: str
    path: tuple[str | int, ...]
    severity: Severity
    message: str | None = None  # exact text, for rules that quote upstream
    contains: str | None = None  # a quoted upstream string inside a longer message
    at_key: bool = False
    also: frozenset[str] = frozenset()  # other codes the same input rightly produces


CASES = [
    Case(
        "both strategies: MPS silently wins",
        {
            "flags": {"mpsRoot": "/run/nvidia/mps"},
            "sharing": {"timeSlicing": {"resources": [gpu(8)]}, "mps": {"resources": [gpu(2)]}},
        },
        "sharing.both-strategies",
        TS,
        E,
        at_key=True,
    ),
    Case(
        "sharing block without resources",
        time_slicing(renameByDefault=True),
        "sharing.no-resources",
        TS,
        E,
        contains="no resources specified",
        at_key=True,
    ),
    Case(
        "sharing block with an empty resources list",
        {"sharing": {"mps": {"resources": []}}, "flags": {"mpsRoot": "/mps"}},
        "sharing.no-resources",
        (*MPS, "resources"),
        E,
        contains="no resources specified",
    ),
    Case(
        "replicas: 1 does not turn sharing off",
        time_slicing(gpu(1)),
        "sharing.replicas-too-low",
        (*TS, "resources", 0, "replicas"),
        E,
        message="number of replicas must be >= 2",
    ),
    Case(
        "replicas: 0 under MPS",
        mps(gpu(0)),
        "sharing.replicas-too-low",
        (*MPS, "resources", 0, "replicas"),
        E,
        message="number of replicas must be >= 2",
    ),
    Case(
        "replicas 1.0 is read as the integer 1",
        time_slicing(gpu(1.0)),
        "sharing.replicas-too-low",
        (*TS, "resources", 0, "replicas"),
        E,
    ),
    Case(
        "a prefix other than nvidia.com/",
        time_slicing({"name": "example.com/gpu", "replicas": 2}),
        "sharing.resource-name-prefix",
        (*TS, "resources", 0, "name"),
        E,
        contains=f"incorrect format for resource name 'nvidia.com/example.com/gpu': [{DNS1123}]",
    ),
    Case(
        "name over 63 characters with its prefix",
        time_slicing({"name": "g" * 53, "replicas": 2}),
        "sharing.resource-name-too-long",
        (*TS, "resources", 0, "name"),
        E,
        message="fully-qualified resource name must be 63 characters or less: nvidia.com/"
        + "g" * 53,
    ),
    Case(
        "uppercase name",
        time_slicing({"name": "nvidia.com/GPU", "replicas": 2}),
        "sharing.resource-name-format",
        (*TS, "resources", 0, "name"),
        E,
        message=f"incorrect format for resource name 'nvidia.com/GPU': [{DNS1123}]",
    ),
    Case(
        "rename is validated like name",
        time_slicing(gpu(2, rename="shared_gpu")),
        "sharing.resource-name-format",
        (*TS, "resources", 0, "rename"),
        E,
        message=f"incorrect format for resource name 'nvidia.com/shared_gpu': [{DNS1123}]",
    ),
    Case(
        "an empty rename is invalid upstream",
        time_slicing(gpu(2, rename="")),
        "sharing.resource-name-format",
        (*TS, "resources", 0, "rename"),
        E,
        message=f"incorrect format for resource name 'nvidia.com/': [{DNS1123}]",
    ),
    Case(
        "names in the ignored top-level resources block are still validated",
        {"resources": {"mig": [{"pattern": "1g.10gb", "name": "MIG-small"}]}},
        "sharing.resource-name-format",
        ("resources", "mig", 0, "name"),
        E,
        message=f"incorrect format for resource name 'nvidia.com/MIG-small': [{DNS1123}]",
        also=frozenset({"sharing.resources-ignored"}),
    ),
    Case(
        "the same resource twice, bare and qualified",
        time_slicing({"name": "gpu", "replicas": 4}, gpu(8)),
        "sharing.duplicate-resource",
        (*TS, "resources", 1, "name"),
        E,
    ),
    Case(
        "a MIG resource under migStrategy none is a no-op",
        time_slicing({"name": "nvidia.com/mig-1g.10gb", "replicas": 2}),
        "sharing.resource-not-advertised",
        (*TS, "resources", 0, "name"),
        W,
    ),
    Case(
        "a MIG resource under single is a no-op (MIG devices are nvidia.com/gpu)",
        time_slicing({"name": "mig-1g.10gb", "replicas": 2}, flags={"migStrategy": "single"}),
        "sharing.resource-not-advertised",
        (*TS, "resources", 0, "name"),
        W,
    ),
    Case(
        "an unknown resource under mixed is a no-op",
        time_slicing(
            {"name": "nvidia.com/gpu-small", "replicas": 2}, flags={"migStrategy": "mixed"}
        ),
        "sharing.resource-not-advertised",
        (*TS, "resources", 0, "name"),
        W,
    ),
    Case(
        "MPS shares only nvidia.com/gpu",
        mps({"name": "nvidia.com/mig-1g.10gb", "replicas": 2}),
        "sharing.resource-not-advertised",
        (*MPS, "resources", 0, "name"),
        W,
    ),
    Case(
        "devices: a string other than all",
        time_slicing(gpu(2, devices="first-two")),
        "sharing.bad-devices",
        (*TS, "resources", 0, "devices"),
        E,
        contains="devices set as 'first-two' but the only valid string input is 'all'",
    ),
    Case(
        "devices: a count of zero",
        time_slicing(gpu(2, devices=0)),
        "sharing.bad-devices",
        (*TS, "resources", 0, "devices"),
        E,
        contains="devices set as '0' but a count of devices must be > 0",
    ),
    Case(
        "devices: a list item that is no device reference",
        time_slicing(gpu(2, devices=[0, "0000:3b:00.0"])),
        "sharing.bad-devices",
        (*TS, "resources", 0, "devices", 1),
        E,
        contains='"unsupported type for device in devices list: 0000:3b:00.0, string"',
    ),
    Case(
        "devices: a negative index (upstream prints an empty value)",
        time_slicing(gpu(2, devices=[-1])),
        "sharing.bad-devices",
        (*TS, "resources", 0, "devices", 0),
        E,
        contains='"unsupported type for device in devices list: , string"',
    ),
    Case(
        "devices: a malformed GPU UUID",
        time_slicing(gpu(2, devices=["GPU-1234"])),
        "sharing.bad-devices",
        (*TS, "resources", 0, "devices", 0),
        E,
    ),
    Case(
        "devices: a valid selection is ignored",
        time_slicing(gpu(2, devices=[0, "1:0", "GPU-11ba558d-3437-2335-2fd8-a78c8502f87f"])),
        "sharing.devices-ignored",
        (*TS, "resources", 0, "devices"),
        W,
        contains="\"Customizing the 'devices' field in sharing.timeSlicing.resources is not yet "
        'supported in the config. Ignoring..."',
    ),
    Case(
        "devices: a count is ignored",
        mps(gpu(2, devices=2)),
        "sharing.devices-ignored",
        (*MPS, "resources", 0, "devices"),
        W,
    ),
    Case(
        "a custom rename is ignored",
        time_slicing(gpu(2, rename="gpu-half")),
        "sharing.rename-ignored",
        (*TS, "resources", 0, "rename"),
        W,
        contains="\"Setting the 'rename' field in sharing.timeSlicing.resources is not yet "
        'supported in the config. Ignoring..."',
    ),
    Case(
        "a rename other than <name>.shared under renameByDefault is ignored",
        time_slicing(gpu(2, rename="gpu.half"), renameByDefault=True),
        "sharing.rename-ignored",
        (*TS, "resources", 0, "rename"),
        W,
    ),
    Case(
        "more than 16 time-slicing replicas",
        time_slicing(gpu(17)),
        "sharing.many-replicas",
        (*TS, "resources", 0, "replicas"),
        W,
    ),
    Case(
        "more than 48 MPS replicas",
        mps(gpu(49)),
        "sharing.mps-too-many-replicas",
        (*MPS, "resources", 0, "replicas"),
        E,
        contains='"invalid MPS configuration: invalid device maximum allowed replicas exceeded: '
        '49 > 48"',
    ),
    Case(
        "17 to 48 MPS replicas need compute capability 7.5",
        mps(gpu(17)),
        "sharing.mps-replicas-old-gpus",
        (*MPS, "resources", 0, "replicas"),
        W,
        contains="invalid device maximum allowed replicas exceeded: 17 > 16",
    ),
    Case(
        "MPS without mpsRoot",
        {"sharing": {"mps": {"resources": [gpu(2)]}}},
        "sharing.mps-root-missing",
        MPS,
        W,
        contains='"using MPS requires --mps-root to be specified"',
        at_key=True,
    ),
    Case(
        "MPS with an empty mpsRoot",
        {"flags": {"mpsRoot": ""}, "sharing": {"mps": {"resources": [gpu(2)]}}},
        "sharing.mps-root-missing",
        MPS,
        W,
        at_key=True,
    ),
    Case(
        "MPS with migStrategy mixed",
        mps(gpu(2), flags={"migStrategy": "mixed"}),
        "sharing.mps-with-mixed-mig",
        ("flags", "migStrategy"),
        E,
        message="using --mig-strategy=mixed is not supported with MPS",
    ),
    Case(
        "failRequestsGreaterThanOne: false under MPS",
        mps(gpu(2), failRequestsGreaterThanOne=False),
        "sharing.mps-fail-requests-version",
        (*MPS, "failRequestsGreaterThanOne"),
        W,
    ),
    Case(
        "sharedDevicesAllocationPolicy needs v0.20",
        {"flags": {"plugin": {"sharedDevicesAllocationPolicy": "packed"}}},
        "sharing.allocation-policy-version",
        ("flags", "plugin", "sharedDevicesAllocationPolicy"),
        W,
    ),
    Case(
        "deviceListStrategy as a comma-joined string",
        {"flags": {"plugin": {"deviceListStrategy": "envvar,cdi-cri"}}},
        "sharing.device-list-comma",
        ("flags", "plugin", "deviceListStrategy"),
        E,
        contains='"invalid --device-list-strategy option: invalid strategy: envvar,cdi-cri"',
    ),
    Case(
        "sleepInterval as a bare number is nanoseconds",
        {"flags": {"gfd": {"sleepInterval": 60}}},
        "sharing.sleep-interval-nanoseconds",
        ("flags", "gfd", "sleepInterval"),
        W,
    ),
    Case(
        "sleepInterval: infinite needs GFD v0.19",
        {"flags": {"gfd": {"sleepInterval": "infinite"}}},
        "sharing.sleep-interval-version",
        ("flags", "gfd", "sleepInterval"),
        W,
    ),
    Case(
        "IMEX channel IDs other than [] or [0]",
        {"imex": {"channelIDs": [1, 2]}},
        "sharing.imex-channel-ids",
        ("imex", "channelIDs"),
        E,
        message="invalid IMEX channel IDs: invalid IMEX config: channelIDs must be [] or [0]; "
        "found [1 2]",
    ),
    Case(
        "a non-empty top-level resources block is ignored",
        {"resources": {"gpus": [{"pattern": "*", "name": "gpu"}]}},
        "sharing.resources-ignored",
        ("resources",),
        W,
        contains="\"Customizing the 'resources' field is not yet supported in the config. "
        'Ignoring..."',
        at_key=True,
    ),
]


def matching(found: list[Finding], case: Case) -> list[Finding]:
    return [f for f in found if f.code == case.code and f.path == case.path]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rule_reports_its_finding(case: Case) -> None:
    found = matching(sharing.check(case.doc), case)
    assert len(found) == 1, sharing.check(case.doc)
    finding = found[0]
    assert finding.severity is case.severity
    assert finding.at_key is case.at_key
    assert finding.hint, "every finding says how to fix it"
    if case.message is not None:
        assert finding.message == case.message
    if case.contains is not None:
        assert case.contains in finding.message


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rule_reports_nothing_else(case: Case) -> None:
    codes = {f.code for f in sharing.check(case.doc)}
    assert codes == {case.code, *case.also}


def test_every_rule_has_a_case() -> None:
    assert set(sharing.RULES) == {c.code for c in CASES}


VALID = [
    pytest.param(time_slicing(gpu(4)), id="time-slicing nvidia.com/gpu"),
    pytest.param(time_slicing({"name": "gpu", "replicas": 2}), id="bare name"),
    pytest.param(time_slicing(gpu(16)), id="16 time-slicing replicas"),
    pytest.param(mps(gpu(16)), id="16 MPS replicas"),
    pytest.param(mps(gpu(2), failRequestsGreaterThanOne=True), id="MPS failing requests > 1"),
    pytest.param(
        time_slicing(
            gpu(2),
            {"name": "nvidia.com/mig-1g.10gb", "replicas": 4},
            {"name": "mig-1g.10gb.me", "replicas": 2},
            flags={"migStrategy": "mixed"},
        ),
        id="MIG profiles under mixed",
    ),
    pytest.param(
        time_slicing(gpu(2, rename="gpu.shared"), renameByDefault=True),
        id="the default rename under renameByDefault",
    ),
    pytest.param(time_slicing(gpu(2, devices="all")), id="devices: all"),
    pytest.param({"flags": {"plugin": {"deviceListStrategy": ["envvar", "cdi-cri"]}}}, id="list"),
    pytest.param({"flags": {"gfd": {"sleepInterval": 60e9}}}, id="sleepInterval in nanoseconds"),
    pytest.param({"imex": {"channelIDs": [0]}}, id="IMEX channel 0"),
    pytest.param({"imex": {"channelIDs": []}}, id="no IMEX channel"),
    pytest.param({"resources": {"gpus": []}}, id="empty resources block"),
    pytest.param({}, id="empty config"),
]


@pytest.mark.parametrize("doc", VALID)
def test_valid_configs_have_no_findings(doc: dict[str, Any]) -> None:
    assert sharing.check(doc) == []


@pytest.mark.parametrize(
    "device",
    [
        "7",
        "0:3",
        "GPU-b1028956-cfa2-0990-bf4a-5da9abb51763",
        "GPU-B1028956-CFA2-0990-BF4A-5DA9ABB51763",
        "GPU-{b1028956-cfa2-0990-bf4a-5da9abb51763}",
        "GPU-b1028956cfa20990bf4a5da9abb51763",
        "MIG-b1028956-cfa2-0990-bf4a-5da9abb51763",
        "MIG-GPU-b1028956-cfa2-0990-bf4a-5da9abb51763/3/0",
    ],
)
def test_device_references_upstream_accepts(device: str) -> None:
    assert sharing.check(time_slicing(gpu(2, devices=[device])))[0].code == (
        "sharing.devices-ignored"
    )


@pytest.mark.parametrize(
    "device",
    ["-1", "+1", "0:1:2", "gpu0", "GPU-xyz", "MIG-GPU-b1028956-cfa2-0990-bf4a-5da9abb51763/3", ""],
)
def test_device_references_upstream_rejects(device: str) -> None:
    assert sharing.check(time_slicing(gpu(2, devices=[device])))[0].code == "sharing.bad-devices"


def test_the_ignored_time_slicing_block_still_fails_to_parse() -> None:
    # upstream parses both blocks before MPS wins, so a parse error in timeSlicing still counts
    doc = mps(gpu(2))
    doc["sharing"]["timeSlicing"] = {"resources": [gpu(1)]}
    codes = {f.code for f in sharing.check(doc)}
    assert codes == {"sharing.both-strategies", "sharing.replicas-too-low"}


def test_the_ignored_time_slicing_block_gets_no_behaviour_warnings() -> None:
    doc = mps(gpu(2))
    doc["sharing"]["timeSlicing"] = {"resources": [gpu(64, devices=[0], rename="x")]}
    assert {f.code for f in sharing.check(doc)} == {"sharing.both-strategies"}


def test_no_op_rule_is_skipped_when_mig_strategy_is_invalid() -> None:
    doc = time_slicing({"name": "mig-1g.10gb", "replicas": 2}, flags={"migStrategy": "Mixed"})
    assert sharing.check(doc) == []  # the schema reports the bad migStrategy


def test_a_comma_string_with_unknown_names_is_left_to_the_schema() -> None:
    assert sharing.check({"flags": {"plugin": {"deviceListStrategy": "envvar,cdi"}}}) == []


def test_duplicates_are_reported_once_per_extra_entry() -> None:
    found = sharing.check(time_slicing(gpu(2), gpu(3), {"name": "gpu", "replicas": 4}))
    assert [f.path[-2] for f in found if f.code == "sharing.duplicate-resource"] == [1, 2]
    assert "first as entry 0" in found[0].message


@pytest.mark.parametrize(
    "doc",
    [
        None,
        [],
        "version: v1",
        {"sharing": None},
        {"sharing": {"timeSlicing": "yes"}},
        {"sharing": {"timeSlicing": {"resources": "nvidia.com/gpu"}}},
        {"sharing": {"timeSlicing": {"resources": [None, 3, []]}}},
        time_slicing({"name": 5, "replicas": "4", "devices": True, "rename": None}),
        time_slicing(gpu(2.5)),
        time_slicing(gpu(True)),
        {"flags": {"plugin": "x", "gfd": ["infinite"], "mpsRoot": 3}},
        {"flags": {"gfd": {"sleepInterval": True}}},
        {"imex": {"channelIDs": [1, "2"]}},
        {"imex": {"channelIDs": "0"}},
        {"resources": {"gpus": "all", "mig": None}},
    ],
)
def test_wrongly_typed_values_are_left_to_the_schema(doc: Any) -> None:
    assert sharing.check(doc) == []
