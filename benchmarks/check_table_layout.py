"""Check (not a test, not collected): `render.plain_table` lays tables out exactly as tabulate's
`plain` format with `disable_numparse` does, over thousands of generated tables.

`plain_table` replaced the tabulate call for the `mig validate` budget (docs/performance.md);
this is the evidence that output stayed byte-identical, next to the run of the whole test suite
with both layouts compared on every table it printed. Needs hypothesis (a test extra).
Run: `.venv/bin/python -m benchmarks.check_table_layout [--examples N]`.
"""

from __future__ import annotations

import argparse

from hypothesis import given, settings
from hypothesis import strategies as st
from tabulate import tabulate

from kubectl_gpu.cli.render import plain_table

CELL = st.one_of(
    st.text(max_size=12),  # anything: mostly the fallback to tabulate
    st.text(alphabet="ab <>-./:=,0123456789", max_size=12),  # the laid-out-here path
    st.sampled_from(["<none>", "1", "0.5", "1e3", "-2", "True", "", " x", "x ", "ä", "全"]),
)


def tables(columns: int) -> st.SearchStrategy[tuple[list[str], list[list[str]]]]:
    row = st.lists(CELL, min_size=columns, max_size=columns)
    return st.tuples(row, st.lists(row, min_size=1, max_size=6))


def check(examples: int) -> None:
    @settings(max_examples=examples, deadline=None, database=None)
    @given(st.integers(1, 6).flatmap(tables))
    def same(case: tuple[list[str], list[list[str]]]) -> None:
        headers, table = case
        expected = tabulate(table, headers=headers, tablefmt="plain", disable_numparse=True)
        assert plain_table(table, headers) == expected, case

    same()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=3000)
    check(parser.parse_args().examples)
    print("plain_table == tabulate(plain, disable_numparse) on every generated table")


if __name__ == "__main__":
    main()
