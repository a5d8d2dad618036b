"""What `validate` says about one input: the kind each document was taken for, every finding.

Pure values: nothing here checks or places anything.
"""

from __future__ import annotations

import dataclasses

from kubectl_gpu import findings
from kubectl_gpu.findings import Finding


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
