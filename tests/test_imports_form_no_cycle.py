"""No module of kubectl_gpu imports itself, directly or through others: its import graph has
no circle. Imports made only for type checking count too: they tie two modules together all
the same. A circle means two modules share one piece; the fix is to give the piece to one of
them (a group's module registers its commands, never the other way round)."""

from __future__ import annotations

import copy
import graphlib

import grimp
import pytest


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("kubectl_gpu", cache_dir=None)


def circle(graph: grimp.ImportGraph) -> list[str]:
    """One import circle (its first module repeated at the end), or [] when there is none."""
    edges = {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}
    try:
        graphlib.TopologicalSorter(edges).prepare()
    except graphlib.CycleError as e:
        return list(e.args[1])
    return []


def test_the_package_imports_form_no_circle(graph: grimp.ImportGraph) -> None:
    found = circle(graph)
    assert not found, "import circle: " + " -> ".join(found)


def test_a_circle_would_be_named(graph: grimp.ImportGraph) -> None:
    # the check itself: a command module that imported its group back is caught
    graph = copy.deepcopy(graph)
    graph.add_import(importer="kubectl_gpu.cli.mig.apply", imported="kubectl_gpu.cli.mig")
    found = circle(graph)
    assert set(found) == {"kubectl_gpu.cli.mig", "kubectl_gpu.cli.mig.apply"}
