"""Findings: one problem found in a config, located in its file.

Owns the `Finding` value and its JSON-pointer rendering. Validators in the domain
produce findings with a path inside the document only; the loader (`schema.py`)
fills in file, line and column. Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence

PathItem = str | int
Path = tuple[PathItem, ...]


class Severity(str, enum.Enum):
    """How bad a finding is. Only errors make `validate` exit 1."""

    ERROR = "error"
    WARNING = "warning"


@dataclasses.dataclass(frozen=True)
class Finding:
    """One problem, in the user's words, with where it is and how to fix it.

    `code` is a stable identifier (e.g. `sharing.replicas-too-low`) that scripts and
    tests can rely on; `message` and `hint` are prose and may be reworded.
    `at_key` says the finding is about a mapping key itself (an unknown field),
    so its line is the key's, not the value's.
    """

    severity: Severity
    code: str
    path: Path
    message: str
    hint: str = ""
    file: str = ""
    line: int | None = None  # 1-based
    column: int | None = None  # 1-based
    at_key: bool = False

    @property
    def pointer(self) -> str:
        """The path as an RFC 6901 JSON pointer, e.g. `/sharing/timeSlicing`."""
        return pointer(self.path)

    def located(self, file: str, line: int | None, column: int | None) -> Finding:
        """Return a copy that knows where it is."""
        return dataclasses.replace(self, file=file, line=line, column=column)

    def under(self, prefix: Path) -> Finding:
        """Return a copy whose path is nested below `prefix` (a ConfigMap key, say)."""
        return dataclasses.replace(self, path=prefix + self.path)

    def to_dict(self) -> dict[str, object]:
        """The stable machine-readable form (schemas/validate-result.v1.json)."""
        return {
            "severity": self.severity.value,
            "code": self.code,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "path": self.pointer,
            "message": self.message,
            "hint": self.hint or None,
        }


def error(path: Sequence[PathItem], code: str, message: str, hint: str = "") -> Finding:
    """An error-level finding at `path`."""
    return Finding(Severity.ERROR, code, tuple(path), message, hint)


def warning(path: Sequence[PathItem], code: str, message: str, hint: str = "") -> Finding:
    """A warning-level finding at `path`."""
    return Finding(Severity.WARNING, code, tuple(path), message, hint)


Rule = tuple[Severity, str, str]  # severity, message and hint templates of one rule code


def from_rule(
    rules: Mapping[str, Rule], code: str, path: Path, *, at_key: bool = False, **values: object
) -> Finding:
    """The finding for `code` of a rule catalogue, its message and hint filled with `values`."""
    severity, message, hint = rules[code]
    text, fix = message.format(**values), hint.format(**values)
    return Finding(severity, code, path, text, fix, at_key=at_key)


def pointer(path: Sequence[PathItem]) -> str:
    """Render a path as an RFC 6901 JSON pointer ("" is the whole document)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def has_errors(findings: Sequence[Finding]) -> bool:
    """True when any finding is an error."""
    return any(f.severity is Severity.ERROR for f in findings)
