"""No module of kubectl_gpu, of the test kit (`tests.kit`, the one package under tests/) or of
benchmarks/ imports itself, directly or through others: the import graph of the three has no
circle. Imports made only for type checking count too: they tie two modules together all the
same. A circle means two modules share one
piece; the fix is to give the piece to one of them (a group's module registers its commands,
never the other way round; every benchmark prints the machine through `benchmarks.machine`,
not through `run_all`, which imports them all)."""

from __future__ import annotations

import copy
import graphlib

import grimp
import pytest

# The product, the kit and the benchmarks, in one graph: a circle may pass between them (the
# benchmarks and the demo use the kit). Test folders without an __init__.py are not packages
# and stay out of the graph; nothing imports them but pytest.
PACKAGES = ("kubectl_gpu", "tests", "benchmarks")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, cache_dir=None)


def circle(graph: grimp.ImportGraph) -> list[str]:
    """One import circle (its first module repeated at the end), or [] when there is none."""
    edges = {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}
    try:
        graphlib.TopologicalSorter(edges).prepare()
    except graphlib.CycleError as e:
        return list(e.args[1])
    return []


def test_the_graph_holds_product_kit_and_benchmarks(graph: grimp.ImportGraph) -> None:
    # the check below is only as wide as the graph: each part must be in it
    for module in ("kubectl_gpu.cli", "tests.kit.cluster", "tests.kit.node.nodes",
                   "tests.kit.plane.plane", "tests.kit.kube", "benchmarks.run_all"):  # fmt: skip
        assert module in graph.modules


def test_no_import_circle_in_product_kit_or_benchmarks(graph: grimp.ImportGraph) -> None:
    found = circle(graph)
    assert not found, "import circle: " + " -> ".join(found)


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("kubectl_gpu.cli.mig.apply", "kubectl_gpu.cli.mig"),  # a command importing its group
        ("tests.kit.plane.store", "tests.kit.cluster.cluster"),  # the kit: a floor reaching up
        ("benchmarks.machine", "benchmarks.run_all"),  # a benchmark reaching back to run_all
    ],
)
def test_a_circle_would_be_named(graph: grimp.ImportGraph, importer: str, imported: str) -> None:
    # the check itself: an import back up the chain is caught, in each of the three parts
    graph = copy.deepcopy(graph)
    graph.add_import(importer=importer, imported=imported)
    found = circle(graph)
    assert importer in found and imported in found
