"""Reading Prometheus' text exposition format (version 0.0.4), bounded, as dcgm-exporter
serves it on `/metrics`.

Owns turning the text into `Sample`s (name, labels, value): `# HELP`/`# TYPE` and other
comments are skipped, label values unescaped (`\\\\`, `\\"`, `\\n`), a timestamp after the
value ignored. At most `MAX_BYTES` of text, `MAX_SAMPLES` samples and `MAX_LABELS` labels a
sample are read; a line that is not a sample is skipped and counted, never fatal (an
exporter of another version may add forms we do not know). Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
import math
import re

MAX_BYTES = 8 * 1024 * 1024  # an 8-GPU node with every DCGM field and pod label: < 1 MiB
MAX_SAMPLES = 100_000
MAX_LABELS = 64

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|\})')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


@dataclasses.dataclass(frozen=True)
class Sample:
    """One sample: metric name, labels (sorted pairs) and value."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    def label(self, key: str) -> str | None:
        """One label's value, None when absent or empty."""
        return next((v for k, v in self.labels if k == key), None) or None


@dataclasses.dataclass(frozen=True)
class Parsed:
    """The samples read, and how many lines were skipped as unreadable or over the bounds."""

    samples: tuple[Sample, ...]
    skipped: int
    truncated: bool


def parse(text: str) -> Parsed:
    """The samples of an exposition text; see the module docstring for the bounds."""
    truncated = len(text) > MAX_BYTES
    found: list[Sample] = []
    skipped = 0
    for line in text[:MAX_BYTES].splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if len(found) >= MAX_SAMPLES:
            truncated = True
            break
        sample = _sample(line)
        if sample is None:
            skipped += 1
        else:
            found.append(sample)
    return Parsed(tuple(found), skipped, truncated)


def _sample(line: str) -> Sample | None:
    name = _NAME.match(line)
    if name is None:
        return None
    rest = line[name.end() :]
    labels: list[tuple[str, str]] = []
    if rest.startswith("{"):
        position = 1
        if rest[1:].lstrip().startswith("}"):
            position = rest.index("}") + 1
        else:
            while True:
                match = _LABEL.match(rest, position)
                if match is None or len(labels) >= MAX_LABELS:
                    return None
                labels.append((match.group(1), _unescape(match.group(2))))
                position = match.end()
                if match.group(3) == "}":
                    break
        rest = rest[position:]
    parts = rest.split()
    if not parts or len(parts) > 2:
        return None
    value = _value(parts[0])
    if value is None:
        return None
    return Sample(name.group(0), tuple(sorted(labels)), value)


def _value(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return None if math.isnan(value) or math.isinf(value) else value


def _unescape(text: str) -> str:
    return re.sub(r"\\[\\n\"]", lambda m: _ESCAPES[m.group(0)], text)
