"""No module of the product (`kubectl_gpu/`), of the test kit (`tests/kit/`, and the support
code of its own tests in `tests/harness/`) or of `benchmarks/` is
over 400 lines; generated gRPC stubs (`_proto/`) aside. A module that outgrows that holds two
nouns: split it by noun, not by size (docs/architecture.md, "Naming, size and circles").

A module over the limit would have to be named below with the reason and who splits it; none
is today. An entry that is no longer needed (the module was split or shrank) fails the test
too, so the list only ever gets shorter."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 400
TREES = ("kubectl_gpu", "tests/kit", "tests/harness", "benchmarks")

ALLOWED: dict[str, str] = {}


def is_support(path: Path) -> bool:
    """A module the rule holds: not a test module, not a generated stub."""
    return not path.name.startswith("test_") and "_proto" not in path.parts


def oversized(root: Path) -> dict[str, int]:
    """Every module of the trees under `root` over the limit: relative path → lines."""
    found = {}
    for tree in TREES:
        for path in sorted((root / tree).rglob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if is_support(path.relative_to(root)) and lines > LIMIT:
                found[path.relative_to(root).as_posix()] = lines
    return found


def allowed(module: str) -> bool:
    return module in ALLOWED


def test_no_module_is_over_400_lines_but_those_named() -> None:
    over = {m: n for m, n in oversized(ROOT).items() if not allowed(m)}
    assert not over, "over 400 lines (split by noun): " + ", ".join(
        f"{m} ({n})" for m, n in sorted(over.items())
    )


def test_every_named_exception_is_still_needed() -> None:
    over = oversized(ROOT)
    stale = [e for e in ALLOWED if e not in over]
    assert not stale, "no longer over 400 lines, take off ALLOWED: " + ", ".join(stale)


@pytest.mark.parametrize(
    ("module", "named"),
    [
        ("kubectl_gpu/cli/grown.py", True),
        ("tests/kit/node/libnvml/grown.py", True),
        ("benchmarks/grown.py", True),
        ("tests/kit/node/grown.py", True),
        ("tests/kit/cluster/grown.py", True),
        ("tests/kit/plane/plane.py", True),
        ("tests/cli/test_grown.py", False),  # a test module: not held by the rule
        ("kubectl_gpu/_proto/grown_pb2.py", False),  # generated
    ],
)
def test_a_module_grown_past_the_limit_is_named(tmp_path: Path, module: str, named: bool) -> None:
    # the check itself, on a tree of its own: one module of 401 lines
    path = tmp_path / module
    path.parent.mkdir(parents=True)
    path.write_text("x = 1\n" * (LIMIT + 1), encoding="utf-8")
    for tree in TREES:
        (tmp_path / tree).mkdir(parents=True, exist_ok=True)
    caught = {m for m in oversized(tmp_path) if not allowed(m)}
    assert (module in caught) is named
