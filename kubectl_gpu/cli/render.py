"""Rendering results: the only writer to stdout.

Owns the output formats (`-o table|wide|json|yaml|name|jsonpath=…`, `--no-headers`). Data
goes to stdout, talk (summaries, progress) to stderr. JSON, YAML and JSONPath read the same
dict, described by a schema in `schemas/`, so scripts get a stable contract. Colour only on a
terminal (click strips ANSI codes otherwise).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import click

from kubectl_gpu.cli import settings
from kubectl_gpu.cli.settings import JSONPATH
from kubectl_gpu.errors import UsageError, printable
from kubectl_gpu.findings import Finding, Severity
from kubectl_gpu.keys import API_VERSION as API_VERSION  # one definition, in keys

_COLOURS = {Severity.ERROR: "red", Severity.WARNING: "yellow"}


@dataclasses.dataclass(frozen=True)
class Column:
    """One table column: its header, how to read a row, and whether only `-o wide` shows it."""

    header: str
    value: Callable[[Any], Any]
    wide_only: bool = False


def say(text: str, *, err: bool = False, nl: bool = True) -> None:
    """Print text lines that carry names and values from the cluster or a file, each line
    made safe for the terminal (`errors.printable`: controls, bidi overrides and lone
    surrogates escaped), as every table cell is."""
    click.echo("\n".join(printable(line) for line in text.split("\n")), err=err, nl=nl)


def is_data(output: str) -> bool:
    """Whether `output` prints the machine-readable document (json, yaml, jsonpath=…)."""
    return output in ("json", "yaml") or output.startswith(JSONPATH)


def emit_table(
    rows: Sequence[Any],
    columns: Sequence[Column],
    output: str,
    document: Any = None,
    name: Callable[[Any], str] | None = None,
) -> None:
    """Print rows as a kubectl-style table (`table`, `wide`), their `TYPE/NAME`s (`name`, when
    the command gives `name`), or `document` as JSON, YAML or through a JSONPath template.

    `document` is the stable machine-readable form (a dict or list described by a schema
    in schemas/); it defaults to the rows themselves when they are plain dicts.
    """
    if is_data(output):
        _emit_data(rows if document is None else document, output)
        return
    if output == "name":
        _emit_names(rows, name)
        return
    shown = [c for c in columns if output == "wide" or not c.wide_only]
    if not rows:
        click.echo("No resources found.", err=True)
        return
    text = _layout([_cells(map(c.value, rows)) for c in shown], [c.header for c in shown])
    click.echo(text.split("\n", 1)[1] if _no_headers() and "\n" in text else text)


def _emit_names(rows: Sequence[Any], name: Callable[[Any], str] | None) -> None:
    if name is None:
        raise UsageError(
            "-o name is not available for this command: its rows are not Kubernetes objects",
            hint="use -o json or -o jsonpath=TEMPLATE",
        )
    for shown in dict.fromkeys(name(row) for row in rows):  # one line per object
        click.echo(shown)


def node_name(row: Any) -> str:
    """`node/NAME` of a row about a node (its `node` attribute), as kubectl -o name prints."""
    return f"node/{row.node}"


def _no_headers() -> bool:
    ctx = click.get_current_context(silent=True)
    return ctx is not None and settings.current(ctx).no_headers


def list_document(kind: str, items: Sequence[Any]) -> dict[str, Any]:
    """The `-o json|yaml` shape of a command that lists things, as kubectl's `kind: List`:
    `apiVersion`, `kind` and `items`, so that `jq '.items[]'` works on every command."""
    return {"apiVersion": API_VERSION, "kind": kind, "items": list(items)}


def plain_table(table: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    """The table as tabulate's `plain` format with `disable_numparse` lays it out.

    Cells that are printable ASCII without surrounding blanks (nearly all) are laid out here,
    byte for byte as tabulate would: each column as wide as its widest cell and at least its
    header plus 2, left-aligned, columns two spaces apart, trailing blanks stripped. Importing
    tabulate and its general layout cost `mig validate` (1,053 rows) about 60 ms of its 300 ms
    budget (docs/performance.md); anything else (wide or control characters, newlines, blanks
    around a cell) still goes to tabulate.
    """
    return _layout([list(column) for column in zip(*table, strict=True)], list(headers))


def _layout(columns: list[list[str]], headers: list[str]) -> str:
    """`plain_table` of a table given column by column (100,000 rows: no transposing)."""
    if not _plain([headers, *columns]):
        from tabulate import tabulate

        table = list(zip(*columns, strict=True))
        return tabulate(table, headers=headers, tablefmt="plain", disable_numparse=True)
    widths = [max(len(h) + 2, *map(len, c)) for h, c in zip(headers, columns, strict=True)]
    # each column padded on its own, then the lines joined: half the cost of formatting
    # 100,000 lines of 12 fields each
    padded = [
        [c.ljust(w) for c in (h, *cells)]
        for h, cells, w in zip(headers, columns, widths, strict=True)
    ]
    return "\n".join([line.rstrip() for line in map("  ".join, zip(*padded, strict=True))])


def _plain(groups: Sequence[Sequence[str]]) -> bool:
    """Every cell printable ASCII without blanks around it, checked on the cells joined
    (the only blank printable ASCII has is the space)."""
    text = "\n".join("\n".join(cells) for cells in groups)
    return (
        text.isascii()
        and text.replace("\n", "").isprintable()
        and not text.startswith(" ")
        and not text.endswith(" ")
        and " \n" not in text
        and "\n " not in text
    )


def _cells(values: Iterable[Any]) -> list[str]:
    """One column's cells; a printable string (nearly every cell) is its own cell."""
    return [
        v
        if v.__class__ is str and v and v.isprintable()
        else str(v)
        if v.__class__ is int  # a number is its digits (replicas, GPU indices)
        else _cell(v)
        for v in values
    ]


def _cell(value: Any) -> str:
    """A table cell: control characters from cluster objects or files are escaped."""
    if value is None or value == "":
        return "<none>"
    if isinstance(value, Mapping):
        return printable(",".join(f"{k}={v}" for k, v in value.items()) or "<none>")
    if isinstance(value, (list, tuple)):
        return printable(",".join(map(str, value)) or "<none>")
    return printable(value)


def emit_validation(reports: Sequence[Any], output: str) -> None:
    """Print `validation.FileReport`s: linter-style lines, or one JSON/YAML document."""
    if is_data(output):
        _emit_data(validation_document(reports), output)
    else:
        for report in reports:
            _emit_file_findings(report)
    click.echo(_summary(reports), err=True)


def validation_document(reports: Sequence[Any]) -> dict[str, Any]:
    """The machine-readable result (schemas/validate-result.v1.json)."""
    all_findings = [f for r in reports for f in r.findings]
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidationResult",
        "valid": all(r.valid for r in reports),
        "summary": {
            "files": len(reports),
            "errors": sum(f.severity is Severity.ERROR for f in all_findings),
            "warnings": sum(f.severity is Severity.WARNING for f in all_findings),
        },
        "files": [
            {
                "file": r.file,
                "valid": r.valid,
                "documents": [
                    {"index": d.index, "kind": d.kind, "keys": dict(d.keys)} for d in r.documents
                ],
                "findings": [f.to_dict() for f in r.findings],
            }
            for r in reports
        ],
    }


def _emit_file_findings(report: Any) -> None:
    if not report.findings:
        kinds = ", ".join(sorted({d.kind for d in report.documents})) or "empty"
        valid = click.style("valid", fg="green")
        click.echo(f"{printable(report.file)}: {valid} ({kinds})")
    for finding in report.findings:
        click.echo(format_finding(finding))


def format_finding(f: Finding) -> str:
    """One finding as `file:line:col: severity: message [code]`, then path and hint lines."""
    where = ":".join(str(p) for p in (f.file, f.line, f.column) if p not in (None, ""))
    severity = click.style(f.severity.value, fg=_COLOURS[f.severity], bold=True)
    # file names, keys and values come from the input: escape what could rewrite the terminal
    lines = [f"{printable(where)}: {severity}: {printable(f.message)} [{f.code}]"]
    if f.path:
        lines.append(f"    at {printable(f.pointer)}")
    if f.hint:
        lines.append(f"    hint: {printable(f.hint)}")
    return "\n".join(lines)


def _summary(reports: Sequence[Any]) -> str:
    doc = validation_document(reports)["summary"]
    invalid = sum(not r.valid for r in reports)
    counts = f"{doc['errors']} error(s), {doc['warnings']} warning(s)"
    if doc["files"] == 1:
        return f"1 file {'invalid' if invalid else 'valid'}: {counts}"
    verdict = f"{invalid} invalid" if invalid else "all valid"
    return f"{doc['files']} files, {verdict}: {counts}"


_FLUSH_BYTES = 1 << 16


def _stream_json(document: Any) -> None:
    """Write JSON in pieces: a 100,000-row map never exists as one string in memory."""
    import sys

    pending: list[str] = []
    size = 0
    for piece in json.JSONEncoder(indent=2).iterencode(document):
        pending.append(piece)
        size += len(piece)
        if size >= _FLUSH_BYTES:
            sys.stdout.write("".join(pending))
            pending, size = [], 0
    pending.append("\n")
    sys.stdout.write("".join(pending))
    sys.stdout.flush()


def _emit_data(document: Any, output: str) -> None:
    if output == "json":
        _stream_json(document)
    elif output.startswith(JSONPATH):
        from kubectl_gpu.cli import jsonpath

        # the document as JSON sees it: tuples become lists, keys strings
        click.echo(jsonpath.render(output[len(JSONPATH) :], json.loads(json.dumps(document))))
    else:
        import yaml

        click.echo(yaml.safe_dump(document, sort_keys=False), nl=False)


GROUPED = 3  # more nodes than this that say the same are said once, with a few of their names


def by_node(said: Iterable[tuple[str, str]]) -> list[str]:
    """`node a: TEXT` per (node, TEXT), or `5 nodes (a, b, c and 2 more): TEXT` where more
    than `GROUPED` nodes say the same: a fleet's preview is a few lines, not one per node."""
    from kubectl_gpu.workflows.progress import named

    nodes_saying: dict[str, list[str]] = {}
    for node, text in said:
        nodes_saying.setdefault(text, []).append(node)
    lines = []
    for text, nodes in nodes_saying.items():
        if len(nodes) > GROUPED:
            lines.append(f"{named(nodes)}: {text}")
        else:
            lines += [f"node {node}: {text}" for node in nodes]
    return lines


def preview_lines(preview: Any) -> list[str]:
    """A capacity change's preview (kubectl_gpu.doctor.preview.Preview) as lines for stderr:
    each node whose pods it hits, with them; the others grouped by what changes."""
    lines = []
    untouched = []
    for node in preview.nodes:
        change = ", ".join(f"{r} {before} → {after}" for r, before, after in node.capacity)
        change = change or "capacity unchanged"
        if not node.hit:
            untouched.append((node.node, change))
            continue
        lines.append(f"node {node.node}: {change}")
        lines += [f"  hits pod {hit.ref}: {hit.why}" for hit in node.hit]
    lines += by_node(untouched)
    lines += [f"Pending pod {pod} would fit on {node}" for pod, node in preview.would_fit]
    return lines


def dry_run_list(objects: Sequence[Any], preview: Any) -> dict[str, Any]:
    """A dry run's `-o json|yaml`: the objects that would be written, as a v1 List (kubectl
    reads its items), and beside them the change's preview (kubectl_gpu.doctor.preview)."""
    document: dict[str, Any] = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
    if preview is not None:
        document["preview"] = preview.to_dict()
    return document
