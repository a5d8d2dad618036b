"""Every fixture is registered once, under one name, and no test imports one by hand.

A fixture that more than one folder uses lives in a plugin module that `pytest_plugins` in
tests/conftest.py registers; one that a folder uses lives in that folder's conftest.py; one
that a module uses lives in that module. Importing a fixture into a module (`from … import
real_cluster as sim_cluster  # noqa`) registers it a second time, often under another name,
and ties the test to where the fixture happens to be written: that is what this test refuses."""

from __future__ import annotations

import ast
import collections
import functools
from pathlib import Path

import pytest

from tests import conftest

ROOT = Path(__file__).resolve().parent.parent
TREES = ("tests", "benchmarks", "scripts")


def fixture_name(node: ast.stmt) -> str | None:
    """The name of a top-level fixture definition, or None for anything else."""
    if isinstance(node, ast.FunctionDef) and any(
        "fixture" in ast.unparse(d) for d in node.decorator_list
    ):
        return node.name
    return None


@functools.cache  # parsed once for the three checks
def modules(root: Path) -> dict[str, ast.Module]:
    """Every Python module of the trees under `root`, by dotted name (stubs aside)."""
    found = {}
    for tree in TREES:
        for path in sorted((root / tree).rglob("*.py")):
            if "_proto" not in path.parts:
                name = ".".join(path.relative_to(root).with_suffix("").parts)
                found[name] = ast.parse(path.read_text(encoding="utf-8"))
    return found


def fixtures(parsed: dict[str, ast.Module]) -> dict[str, set[str]]:
    """Module → the fixtures defined at its top level."""
    return {m: {f for n in t.body if (f := fixture_name(n))} for m, t in parsed.items()}


def hand_imports(parsed: dict[str, ast.Module]) -> list[str]:
    """'module: imports fixture F from M' for every fixture imported by hand."""
    defined = fixtures(parsed)
    found = []
    for module, tree in parsed.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in defined:
                for alias in node.names:
                    if alias.name in defined[node.module]:
                        found.append(f"{module}: imports fixture {alias.name} from {node.module}")
    return found


def shared(parsed: dict[str, ast.Module], plugins: list[str]) -> dict[str, list[str]]:
    """Fixture name → the plugin modules and conftest files that define it."""
    where = collections.defaultdict(list)
    for module, names in fixtures(parsed).items():
        if module in plugins or module.endswith(".conftest"):
            for name in names:
                where[name].append(module)
    return where


def test_no_module_imports_a_fixture() -> None:
    found = hand_imports(modules(ROOT))
    assert not found, "register it in tests/conftest.py's pytest_plugins instead: " + "; ".join(
        found
    )


def test_each_shared_fixture_has_one_home() -> None:
    twice = {n: m for n, m in shared(modules(ROOT), conftest.pytest_plugins).items() if len(m) > 1}
    assert not twice, f"one fixture name, defined in more than one plugin or conftest: {twice}"


def test_every_module_holding_shared_fixtures_is_registered() -> None:
    # a fixture module nobody registers could only be used by importing it by hand
    parsed = modules(ROOT)
    loose = [
        m
        for m, names in fixtures(parsed).items()
        if names
        and m not in conftest.pytest_plugins
        and not m.endswith(".conftest")
        and not m.rpartition(".")[2].startswith("test_")
    ]
    assert not loose, f"fixtures outside a test, a conftest or a registered plugin: {loose}"
    assert all(p in parsed for p in conftest.pytest_plugins)


@pytest.mark.parametrize(
    "line",
    [
        "from tests.kit.cluster.fixture import sim_cluster as real  # noqa: F401",
        "from tests.agent.fixtures import agent",
    ],
)
def test_a_fixture_imported_by_hand_is_named(tmp_path: Path, line: str) -> None:
    # the check itself, on a copy of the plugins and one test module that imports by hand
    for module in ("tests.kit.cluster.fixture", "tests.agent.fixtures"):
        path = tmp_path / Path(*module.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text((ROOT / path.relative_to(tmp_path)).read_text(encoding="utf-8"))
    (tmp_path / "tests" / "test_planted.py").write_text(line + "\n", encoding="utf-8")
    for tree in TREES:
        (tmp_path / tree).mkdir(exist_ok=True)
    assert [f for f in hand_imports(modules(tmp_path)) if f.startswith("tests.test_planted:")]
