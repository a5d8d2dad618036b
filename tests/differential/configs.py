"""Hypothesis strategies for device-plugin and mig-parted configs, valid and broken.

A drawn `Case` is what an author meant (`intent`, plain data in upstream's canonical
spelling, which may itself hold wrong types, edge numbers, unknown or misplaced keys) and a
`Style` to write it in (key case, nulls, YAML 1.1 booleans, number forms, merge keys, a second
document). `respelt_map_keys` marks a case whose key case was changed where upstream reads keys
case-sensitively, i.e. where the respelling changes what the config means.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import strategies as st

from tests.differential.render import BARE_NAMES, DIRECTIVES, ENCODINGS, ESCAPES, TAGS, Style

BIG = 2**63  # one past Go's int
ABSENT = object()


@dataclasses.dataclass(frozen=True)
class Case:
    intent: Any
    style: Style
    respelt_map_keys: bool


def _maybe(
    good: list[Any], bad: list[Any] | None = None, absent: int = 2, often: int = 4
) -> st.SearchStrategy[Any]:
    """Absent (weight `absent`), a good value (weight `often`) or a bad one (weight 1)."""
    choices = [(often, st.sampled_from(good))] if good else []
    if bad:
        choices.append((1, st.sampled_from(list(bad))))
    if absent:
        choices.append((absent, st.just(ABSENT)))
    return _weighted(*choices)


def _weighted(*choices: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of the strategies, each as often as its weight (one_of and sampled_from lean
    towards their first choices, so they cannot weigh them)."""
    total = sum(weight for weight, _ in choices)

    def pick(chance: Any) -> st.SearchStrategy[Any]:
        ticket = chance.randrange(total)
        for weight, strategy in choices:
            if ticket < weight:
                return strategy
            ticket -= weight
        raise AssertionError(ticket)

    return st.randoms(use_true_random=False).flatmap(pick)


def _fields(**pools: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(pools).map(
        lambda d: {k: v for k, v in d.items() if v is not ABSENT}
    )


_BOOL = ([True, False], ["true", 1, "yes"])
_PATH = (["/run/nvidia/mps", "/", "/driver"], ["", 5])

PLUGIN = _fields(
    passDeviceSpecs=_maybe([True, False], ["x"], 4),
    deviceListStrategy=_maybe(
        ["envvar", ["envvar", "cdi-cri"], ["volume-mounts"]], ["envvar,cdi-cri", "bogus", [], 3], 4
    ),
    deviceIDStrategy=_maybe(["uuid", "index"], ["UUID", "bogus"], 4),
    cdiAnnotationPrefix=_maybe(["cdi.k8s.io/"], absent=6),
    containerDriverRoot=_maybe(["/driver-root"], [7], 6),
    sharedDevicesAllocationPolicy=_maybe(["distributed", "packed"], ["bogus"], 5),
)
GFD = _fields(
    oneshot=_maybe([True, False], ["x"], 4),
    noTimestamp=_maybe([True, False], absent=5),
    sleepInterval=_maybe(["60s", "1m30s", "infinite", 60_000_000_000], [5, "garbage", "-1s"], 3),
    outputFile=_maybe(["/etc/kubernetes/node-feature-discovery/features.d/gfd"], absent=6),
)
FLAGS = _fields(
    migStrategy=_maybe(["none", "single", "mixed"], ["Mixed", "bogus", 1], 2),
    failOnInitError=_maybe(*_BOOL, 3),
    mpsRoot=_maybe(*_PATH, 2),
    nvidiaDriverRoot=_maybe(*_PATH, 4),
    gdsEnabled=_maybe(*_BOOL, 5),
    gdrcopyEnabled=_maybe([True, False], absent=6),
    deviceDiscoveryStrategy=_maybe(["auto", "nvml", "tegra"], ["bogus"], 5),
    plugin=_weighted((2, st.just(ABSENT)), (1, PLUGIN)),
    gfd=_weighted((3, st.just(ABSENT)), (1, GFD)),
    renameByDefault=_maybe([], [True], 12),  # misplaced: belongs in a sharing block
)
NAMES = [
    "gpu",
    "nvidia.com/gpu",
    "mig-1g.10gb",
    "nvidia.com/mig-3g.40gb",
    "example.com/gpu",
    "Bad_Name",
    "gpu." + "x" * 60,
    "",
    7,
]
REPLICAS = [2, 3, 4, 16, 4.0, 17, 48, 49, 64, BIG - 1, BIG, 2**64, -1, 0, 1, 4.5, "4", True]
DEVICES = [
    "all",
    2,
    0,
    -1,
    ["0", 1],
    ["0:1"],
    ["GPU-8f4c2bbe-1111-2222-3333-444455556666"],
    "some",
    [1.5],
    [0, None],
]
ENTRY = _fields(
    name=_maybe(NAMES[:4], NAMES[4:], 0),
    replicas=_maybe(REPLICAS[:5], REPLICAS[5:], 0),
    rename=_maybe(["gpu.shared", "nvidia.com/gpu.shared"], ["Bad"], 8),
    devices=_maybe(DEVICES[:1], DEVICES[1:], 6),
)
BLOCK = _fields(
    renameByDefault=_maybe(*_BOOL, 3),
    failRequestsGreaterThanOne=_maybe(*_BOOL, 3),
    resources=_weighted(
        (8, st.lists(ENTRY, min_size=1, max_size=3)), (1, st.sampled_from([ABSENT, [], "x"]))
    ),
)
SHARING = _fields(
    timeSlicing=_weighted((1, st.just(ABSENT)), (2, BLOCK)),
    mps=_weighted((2, st.just(ABSENT)), (1, BLOCK)),
    replicas=_maybe([], [4], 15),  # misplaced
)
IMEX = _fields(
    channelIDs=_maybe([[], [0], [0.0]], [[1], [0, 1], "0"], 1),
    required=_maybe([True, False], ["yes"], 2),
)
CUSTOM = _fields(
    gpus=_maybe([[{"pattern": "*", "name": "gpu"}]], [[{"name": "gpu"}], [{"pattern": "A100*"}]], 0)
)
# Configs that share GPUs as written (time-slicing or MPS, with the MIG strategies that go
# with them): most drawn files are these, so that agreement is measured where it matters.
SHARING_ENTRY = _fields(
    name=st.sampled_from(NAMES[:4]),
    replicas=st.sampled_from([2, 3, 4, 8, 16, 48, 4.0]),
    devices=_maybe(["all"], absent=3),
)
SHARING_BLOCK = _fields(
    renameByDefault=_maybe([True, False], absent=3),
    failRequestsGreaterThanOne=_maybe([True, False], absent=3),
    resources=st.lists(SHARING_ENTRY, min_size=1, max_size=2, unique_by=lambda e: e["name"]),
)
SHARING_CONFIG = _fields(
    version=_maybe(["v1"], absent=1),
    flags=_weighted(
        (1, st.just(ABSENT)),
        (
            2,
            _fields(
                migStrategy=_maybe(["none", "single", "mixed"], absent=1),
                failOnInitError=_maybe([True, False], absent=2),
                plugin=_weighted((2, st.just(ABSENT)), (1, PLUGIN)),
            ),
        ),
    ),
    sharing=_weighted(
        (3, st.fixed_dictionaries({"timeSlicing": SHARING_BLOCK})),
        (2, st.fixed_dictionaries({"mps": SHARING_BLOCK})),
    ),
)
ANY_CONFIG = _fields(
    version=_maybe(["v1"], ["v2", "V1", "", 1], 2),
    flags=_weighted((1, st.just(ABSENT)), (1, FLAGS)),
    sharing=_weighted((1, st.just(ABSENT)), (3, SHARING)),
    imex=_weighted((5, st.just(ABSENT)), (1, IMEX)),
    resources=_weighted((10, st.just(ABSENT)), (1, CUSTOM)),
    unknown=_maybe([], ["x"], 20),
)
DEVICE_PLUGIN = _weighted((1, ANY_CONFIG), (2, SHARING_CONFIG))


# Where the device plugin reads a map by hand: keys there are case-sensitive (in the test's
# own words, from upstream's api/config/v1/replicas.go and resources.go).
def _map_decoded(path: tuple[Any, ...]) -> bool:
    return (path[:1] == ("sharing",) and len(path) >= 3) or (
        path[:1] == ("resources",) and len(path) >= 4
    )


DP_KEYS = {
    (): ["version", "flags", "sharing", "imex", "resources"],
    ("flags",): ["migStrategy", "failOnInitError", "mpsRoot", "plugin", "gfd", "mofedEnabled"],
    ("flags", "plugin"): ["deviceIDStrategy", "deviceListStrategy", "passDeviceSpecs"],
    ("flags", "gfd"): ["sleepInterval", "oneshot"],
    ("sharing",): ["timeSlicing", "mps"],
    ("imex",): ["channelIDs", "required"],
    ("sharing", "timeSlicing"): ["renameByDefault", "failRequestsGreaterThanOne", "resources"],
    ("sharing", "mps"): ["renameByDefault", "failRequestsGreaterThanOne", "resources"],
}
MIG_KEYS = {
    (): ["version", "mig-configs"],
    "spec": ["devices", "device-filter", "mig-enabled", "mig-devices"],
}

_MIG_DEVICES = _maybe(
    [
        *({}, {"1g.5gb": 7}, {"1g.10gb": 2, "3g.40gb": 1}, {"1g.5gb": BIG - 1}),
        *({"2g.10gb": 1.0}, {"1g.10gb+me": 1, "1g.10gb": 5}, {"1g.10gb+gfx": 2}),
        *({"1g.10gb-me": 3}, {"1c.3g.40gb": 3}, {"7g.80gb+me": 1}, {"1g.20gb+me+gfx": 1}),
        *({"1g.10gb": 0, "3g.40gb": 2}, {"2g.20gb": 3, "1g.10gb+me": 0}),  # a zero beside
    ],
    [
        *({"1g.5gb": 0}, {"1g.5gb": -1}, {"bogus": 1}, {"1g.5gb": BIG}),
        *({"1g.5gb+me": 2}, {"1g.5gb+foo": 1}, {"1g.5gb+me-me": 1}, {"1g.5GB": 1}),
    ],
    0,
    often=15,
)


# mig-parted reads each half with Go's ParseUint(s, 0, 32): every form below names A100s.
DEVICE_FILTERS = [
    *("0x20B010DE", ["0x20B010DE", "0x20B210DE"], "0x20b010de", "0x20B010DE:0x147E10DE"),
    *("0x20B0_10DE", "548409566", "0o4054010336", "04054010336", "0x20B010D"),
    "0b100000101100000001000011011110",
]


@st.composite
def _spec(draw: st.DrawFn) -> dict[str, Any]:
    spec = draw(
        _fields(
            devices=_maybe(["all", [0, 1], [0]], [[-1], "some", 3, ["0"], [0, None]], 0, often=15),
            **{
                "device-filter": _maybe(DEVICE_FILTERS, [123, "garbage", "0x1_0000_0000"], 12),
                "mig-enabled": _maybe([True, False], ["true", 1], 1, often=15),
            },
        )
    )
    enabled = spec.get("mig-enabled") is True
    # mostly what mig-parted requires: instances when enabled, none when disabled
    if draw(st.integers(0, 5)) == 0 or enabled:
        devices = draw(_MIG_DEVICES)
        if devices is not ABSENT:
            spec["mig-devices"] = devices
    return spec


SPEC = _spec()
MIG = _fields(
    version=_maybe(["v1"], ["v2", "", "V1", ABSENT], 0, often=15),
    **{
        "mig-configs": _weighted(
            (
                8,
                st.dictionaries(
                    _weighted(
                        (6, st.sampled_from(["all-disabled", "all-1g.5gb", "custom", "Bad Name!"])),
                        (1, st.sampled_from(BARE_NAMES)),  # YAML reads these as other types
                    ),
                    _weighted(
                        (12, st.lists(SPEC, min_size=1, max_size=2)),
                        (1, st.sampled_from([[], "x"])),
                    ),
                    min_size=1,
                    max_size=2,
                ),
            ),
            (1, st.sampled_from([ABSENT, {}])),
        ),
        "extra": _maybe([], ["x"], 60),
    },
)


def _key_paths(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found: list[tuple[Any, ...]] = []
    if isinstance(data, dict):
        for key, value in data.items():
            found.append((*path, key))
            found.extend(_key_paths(value, (*path, key)))
    elif isinstance(data, list):
        for index, item in enumerate(data):
            found.extend(_key_paths(item, (*path, index)))
    return found


def _mappings(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found: list[tuple[Any, ...]] = []
    if isinstance(data, dict):
        found.append(path)
        for key, value in data.items():
            found.extend(_mappings(value, (*path, key)))
    elif isinstance(data, list):
        for index, item in enumerate(data):
            found.extend(_mappings(item, (*path, index)))
    return found


_RESPELL = {
    "lower": str.lower,
    "upper": str.upper,
    "title": lambda s: s[:1].upper() + s[1:],
    "swap": str.swapcase,
    # Go folds with Unicode simple case folding: ſ is s, the Kelvin sign is k
    "long-s": lambda s: s.replace("s", "\u017f", 1),
    "kelvin": lambda s: s.replace("k", "\u212a", 1).replace("K", "\u212a", 1),
}


NUMBER_FORMS = [
    *("dec", "hex", "oct", "under", "float", "exp"),
    *("dotexp", "tagstr", "tagint", "fullwidth", "arabic"),
]


@st.composite
def styles(draw: st.DrawFn, intent: Any, known: Any, mig: bool) -> tuple[Style, bool]:
    keys = _key_paths(intent)
    maps = _mappings(intent)
    respelt: dict[tuple[Any, ...], str] = {}
    if keys and draw(st.booleans()):
        for path in draw(st.lists(st.sampled_from(keys), max_size=3, unique=True)):
            how = draw(st.sampled_from(sorted(_RESPELL)))
            spelt = _RESPELL[how](str(path[-1]))
            if spelt != path[-1]:
                respelt[path] = spelt
    nulls: dict[tuple[Any, ...], str] = {}
    if maps and draw(st.booleans()):
        for path in draw(st.lists(st.sampled_from(maps), max_size=3, unique=True)):
            level = known.get("spec") if mig and len(path) == 3 else known.get(path, [])
            if level:
                key = draw(st.sampled_from(level))
                nulls[(*path, key)] = draw(st.sampled_from(["", " null", " ~"]))
    merges = {}
    if maps and draw(st.integers(0, 3)) == 0:
        path = draw(st.sampled_from(maps))
        merges[path] = (draw(st.integers(1, 5)), draw(st.booleans()))
    style = Style(
        key_case=respelt,
        nulls=nulls,
        booleans=tuple(draw(st.lists(st.integers(0, 8), max_size=3))),
        numbers=tuple(draw(st.lists(st.sampled_from(NUMBER_FORMS), max_size=3))),
        merges=merges,
        merge_form=draw(st.sampled_from(["map", "map", "list", "before"])),
        second_document=draw(
            st.sampled_from(["", "", "", "", "", "", "same", "broken", "not-yaml", "directive"])
        ),
        anchors=draw(st.integers(0, 5)) == 0,
        bare_keys=draw(st.integers(0, 2)) == 0,
        special_float=(
            draw(st.sampled_from(maps)) if maps and draw(st.integers(0, 15)) == 0 else None
        ),
        **draw(_grammar()),
    )
    map_level = any(mig or _map_decoded(p) for p in respelt)
    return style, map_level


def _grammar() -> st.SearchStrategy[dict[str, Any]]:
    """The YAML grammar's families where Go's yaml.v2 and PyYAML part: directives, escapes,
    explicit tags, encodings and byte-order marks; each drawn in about one file in five."""
    rare = lambda pool: _weighted((4, st.just(())), (1, st.lists(pool, min_size=1, max_size=3)))  # noqa: E731
    return st.fixed_dictionaries(
        {
            "directive": _weighted((6, st.just("")), (1, st.sampled_from(DIRECTIVES))),
            "escapes": rare(st.sampled_from(ESCAPES)).map(tuple),
            "tags": rare(st.sampled_from(TAGS)).map(tuple),
            "encoding": _weighted((5, st.just("")), (1, st.sampled_from(ENCODINGS))),
        }
    )


@st.composite
def device_plugin_cases(draw: st.DrawFn) -> Case:
    intent = draw(DEVICE_PLUGIN)
    style, map_level = draw(styles(intent, DP_KEYS, mig=False))
    return Case(intent, style, map_level)


@st.composite
def mig_cases(draw: st.DrawFn) -> Case:
    intent = draw(MIG)
    style, map_level = draw(styles(intent, MIG_KEYS, mig=True))
    return Case(intent, style, map_level)
