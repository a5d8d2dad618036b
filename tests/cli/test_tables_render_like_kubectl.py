"""`render.emit_table`: kubectl-style plain tables, wide columns, and data for scripts."""

from __future__ import annotations

import json

import pytest
import yaml

from kubectl_gpu.cli import render

COLUMNS = [
    render.Column("NODE", lambda r: r["node"]),
    render.Column("GPUS", lambda r: r["gpus"]),
    render.Column("UUID", lambda r: r["uuid"], wide_only=True),
]
ROWS = [{"node": "gpu-a", "gpus": 8, "uuid": "GPU-1"}, {"node": "gpu-b", "gpus": 4, "uuid": None}]


def test_table_shows_headers_and_hides_wide_columns(capsys: pytest.CaptureFixture[str]) -> None:
    render.emit_table(ROWS, COLUMNS, "table")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NODE", "GPUS"]
    assert lines[1].split() == ["gpu-a", "8"]


def test_wide_adds_columns_and_marks_absent_values(capsys: pytest.CaptureFixture[str]) -> None:
    render.emit_table(ROWS, COLUMNS, "wide")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NODE", "GPUS", "UUID"]
    assert lines[2].split() == ["gpu-b", "4", "<none>"]


def test_json_and_yaml_print_the_document(capsys: pytest.CaptureFixture[str]) -> None:
    render.emit_table(ROWS, COLUMNS, "json", document={"items": ROWS})
    assert json.loads(capsys.readouterr().out) == {"items": ROWS}
    render.emit_table(ROWS, COLUMNS, "yaml")
    assert yaml.safe_load(capsys.readouterr().out) == ROWS


def test_no_rows_says_so_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    render.emit_table([], COLUMNS, "table")
    out = capsys.readouterr()
    assert out.out == "" and "No resources found." in out.err
