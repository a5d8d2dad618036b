"""`kubectl gpu mig validate` says a layout fits exactly when some placement of its instances
does not overlap: checked for every multiset of base profiles on a 7-slice and a 4-slice board.

The oracle below is written from docs/upstream-facts.md M4.2 alone: it lists the allowed
(start, size) placements per profile class and tries every combination of them, comparing
memory slices as sets. It shares no code with kubectl_gpu.mig.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from kubectl_gpu.mig import fit, models, profiles
from tests.conftest import CliResult

Run = Callable[..., CliResult]

# class -> (instance cap, allowed starts, size in memory slices); docs/upstream-facts.md M4.2.
SEVEN = {
    "1g": (7, range(0, 7), 1),
    "1g-double": (4, (0, 2, 4, 6), 2),
    "2g": (3, (0, 2, 4), 2),
    "3g": (2, (0, 4), 4),
    "4g": (1, (0,), 4),
    "7g": (1, (0,), 8),
}
FOUR = {"1g": (4, range(0, 4), 1), "2g": (2, (0, 2), 2), "4g": (1, (0,), 4)}
A100_40GB = {
    "1g": "1g.5gb",
    "1g-double": "1g.10gb",
    "2g": "2g.10gb",
    "3g": "3g.20gb",
    "4g": "4g.20gb",
    "7g": "7g.40gb",
}
A30 = {"1g": "1g.6gb", "2g": "2g.12gb", "4g": "4g.24gb"}
Board = dict[str, tuple[int, Sequence[int], int]]


def oracle_fits(board: Board, counts: dict[str, int]) -> bool:
    """True when the instances can be placed without two sharing a memory slice."""
    key = (board is SEVEN, tuple(sorted(counts.items())))
    if key not in _KNOWN:
        _KNOWN[key] = _try_every_placement(board, counts)
    return _KNOWN[key]


_KNOWN: dict[tuple[bool, tuple[tuple[str, int], ...]], bool] = {}


def _try_every_placement(board: Board, counts: dict[str, int]) -> bool:
    per_class = [list(itertools.combinations(board[cls][1], n)) for cls, n in counts.items() if n]
    sizes = [board[cls][2] for cls, n in counts.items() if n]
    for choice in itertools.product(*per_class):
        used: set[int] = set()
        clash = False
        for starts, size in zip(choice, sizes, strict=True):
            for start in starts:
                slices = set(range(start, start + size))
                clash = clash or bool(used & slices)
                used |= slices
        if not clash:
            return True
    return False


def multisets(board: Board) -> list[dict[str, int]]:
    caps = [range(board[cls][0] + 1) for cls in board]
    return [dict(zip(board, counts, strict=True)) for counts in itertools.product(*caps)][1:]


def config_text(names: dict[str, str], layouts: Sequence[dict[str, int]], first: int) -> str:
    lines = ["version: v1", "mig-configs:"]
    for number, counts in enumerate(layouts, start=first):
        lines += [f"  m{number}:", "    - devices: all", "      mig-enabled: true"]
        lines.append("      mig-devices:")
        lines += [f'        "{names[cls]}": {n}' for cls, n in counts.items() if n]
    return "\n".join(lines) + "\n"


def test_the_oracle_knows_the_guides_examples() -> None:
    assert oracle_fits(SEVEN, {"1g": 2, "2g": 1, "3g": 1})  # the guide's 3-2-1-1 layout
    assert not oracle_fits(SEVEN, {"3g": 2, "1g": 1})
    assert oracle_fits(SEVEN, {"4g": 1, "3g": 1})
    assert not oracle_fits(SEVEN, {"4g": 1, "2g": 1, "1g-double": 2})
    assert not oracle_fits(FOUR, {"4g": 1, "1g": 1})


def test_every_multiset_is_enumerated_once() -> None:
    assert len(multisets(SEVEN)) == 8 * 5 * 4 * 3 * 2 * 2 - 1
    assert len(multisets(FOUR)) == 5 * 3 * 2 - 1


CHUNK = 640  # configs per file: keeps each file on libyaml's fast path


@pytest.mark.parametrize("part", range(3))
def test_validate_agrees_on_every_7_slice_multiset(run_cli: Run, tmp_path: Path, part: int) -> None:
    layouts = multisets(SEVEN)[part * CHUNK : (part + 1) * CHUNK]
    assert layouts
    path = tmp_path / "layouts.yaml"
    path.write_text(config_text(A100_40GB, layouts, part * CHUNK))
    result = run_cli("mig", "validate", "-f", str(path), "--gpu", "A100-40GB", "-o", "json")
    verdicts = [r["fits"] for r in result.json["results"]]
    expected = [oracle_fits(SEVEN, counts) for counts in layouts]
    disagree = [counts for counts, v, e in zip(layouts, verdicts, expected, strict=True) if v != e]
    assert disagree == []
    assert result.exit_code == (0 if all(expected) else 1)


def test_validate_agrees_on_every_4_slice_multiset(run_cli: Run, tmp_path: Path) -> None:
    layouts = multisets(FOUR)
    path = tmp_path / "layouts.yaml"
    path.write_text(config_text(A30, layouts, 0))
    result = run_cli("mig", "validate", "-f", str(path), "--gpu", "NVIDIA A30", "-o", "json")
    verdicts = {r["config"]: r["fits"] for r in result.json["results"]}
    expected = {f"m{i}": oracle_fits(FOUR, counts) for i, counts in enumerate(layouts)}
    assert verdicts == expected
    assert sum(expected.values()) == 9  # 4g; 2g x2; 2g+1g x0..2; 1g x1..4 (one empty excluded)


@pytest.mark.parametrize(
    "model", [m for m in models.MODELS if m.board.memory_slices == 8], ids=lambda m: m.key
)
def test_the_fitter_agrees_on_every_7_slice_model(model: models.GpuModel) -> None:
    base = [p for p in model.profiles if not p.media_extensions]
    assert [p.name.split(".")[0] for p in base] == ["1g", "1g", "2g", "3g", "4g", "7g"]
    by_class = {
        "1g": base[0].name,
        "1g-double": base[1].name,
        "2g": base[2].name,
        "3g": base[3].name,
        "4g": base[4].name,
        "7g": base[5].name,
    }
    for counts in multisets(SEVEN):
        devices = [(profiles.parse(by_class[c]), n) for c, n in counts.items() if n]
        try:
            layout = fit.layout(model, devices)
        except fit.MigFitError:
            layout = None
        assert (layout is not None) == oracle_fits(SEVEN, counts), counts
        if layout is not None:  # and what it returns is a real arrangement
            spans = [set(p.placement.slices) for p in layout]
            assert sum(map(len, spans)) == len(set().union(*spans))
            assert all(p.placement in p.profile.placements for p in layout)
