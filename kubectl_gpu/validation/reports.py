"""What `validate` says about one input: the kind each document was taken for, every finding;
and, for the product's own readers of configs, the checked text (`Checked`) and the one
wording of a refusal (`ConfigRejected`).

Pure values: nothing here checks or places anything.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kubectl_gpu import findings
from kubectl_gpu.errors import ConfigError
from kubectl_gpu.findings import Finding
from kubectl_gpu.mig.spec import MigConfigFile


@dataclasses.dataclass(frozen=True)
class DocumentReport:
    """What one document in a file was taken for."""

    index: int
    kind: str  # a KINDS name, "configmap", "dra", "list" or "unknown"
    # for a ConfigMap: (data key, kind of its value); for a List: (item index, its kind)
    keys: tuple[tuple[str, str], ...] = ()


@dataclasses.dataclass(frozen=True)
class FileReport:
    """Every finding about one input, in file order."""

    file: str
    documents: tuple[DocumentReport, ...]
    findings: tuple[Finding, ...]

    @property
    def valid(self) -> bool:
        """True when no finding is an error (warnings allowed)."""
        return not findings.has_errors(self.findings)


VALIDATE_HINT = "kubectl gpu validate -f FILE lists every problem and how to fix it"


class ConfigRejected(ConfigError):
    """A config the product will not act on, worded one way wherever it is refused: the
    first error (file, line, JSON path, message), how many more, and the `kubectl gpu
    validate` hint. `findings` holds every error."""

    def __init__(self, problems: tuple[Finding, ...]) -> None:
        first = problems[0]
        line = f" line {first.line}" if first.line else ""
        at = f", at {first.pointer}" if first.pointer else ""
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(
            f"{first.file}{line}{at}: {first.message}{more}",
            hint=VALIDATE_HINT,
            findings=problems,
        )

    @property
    def one_line(self) -> str:
        """The rejection with its hint, for a place that shows one line (a node annotation,
        a row of `share show`)."""
        return f"{self.message}; {self.hint}"


@dataclasses.dataclass(frozen=True)
class Checked:
    """One config text read once and checked as `kubectl gpu validate` checks it: its plain
    data (None when empty, or when the YAML cannot be read as one mapping), the report, and
    the rejection when an error was found."""

    data: dict[str, Any] | None
    readable: bool  # one YAML document, a mapping or empty, with no YAML-level error
    report: FileReport

    @property
    def rejection(self) -> ConfigRejected | None:
        """The one-wording rejection, or None when no finding is an error."""
        errors = tuple(f for f in self.report.findings if f.severity is findings.Severity.ERROR)
        return ConfigRejected(errors) if errors else None

    def accepted(self) -> dict[str, Any]:
        """The data, checked: ConfigRejected when any finding is an error or nothing was read."""
        rejection = self.rejection
        if rejection is not None:
            raise rejection
        if self.data is None:
            raise ConfigError(f"{self.report.file} holds no config", hint=VALIDATE_HINT)
        return self.data


@dataclasses.dataclass(frozen=True)
class AcceptedMigConfig:
    """A mig-parted config that passed every check: where it was read (a ConfigMap's key
    named), its plain data as read, and the typed config built from it once."""

    file: str
    data: dict[str, Any]
    config: MigConfigFile
