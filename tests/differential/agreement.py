"""Comparing `validate` with upstream's verdict on a batch of drawn cases.

Two rules, from the issue that asked for this suite:
- upstream refuses a file => `validate` reports an error in it;
- upstream accepts it and runs the config its author meant (the canonical spelling is
  accepted, everything the author wrote is in upstream's effective config, and this spelling
  gives the same effective config) => `validate` reports no error, except the deliberate
  strictness listed in docs/validate-vs-upstream.md (warnings are always allowed).
And one from issue 31: upstream accepts a file but runs another config than the one written
(it drops `devices`, a BOM hides lines, a respelt key is ignored) => `validate` says something
(an error or a warning): silence there is the dangerous kind of agreement.

Files are bytes (a drawn encoding), decoded for `validate` as NVIDIA's reader decodes them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubectl_gpu import documents, validation
from kubectl_gpu.findings import Severity
from tests.differential import oracle, reasons
from tests.differential.configs import Case
from tests.differential.render import to_bytes, to_yaml

DOCS = Path(__file__).resolve().parents[2] / "docs" / "validate-vs-upstream.md"
MISSING = object()
_ROW = re.compile(r"^\| `([a-z0-9.-]+)` \|", re.MULTILINE)


def deliberate_codes() -> set[str]:
    """The error codes docs/validate-vs-upstream.md lists as deliberately stricter."""
    return set(_ROW.findall(DOCS.read_text("utf-8")))


@dataclasses.dataclass
class Tally:
    files: int = 0
    refused_by_upstream: int = 0
    same_reason: int = 0  # refused by both, for the same class of reason (reasons.py)
    sharing_gpus: int = 0  # of those accepted as meant: time-slicing or MPS in effect
    accepted_as_meant: int = 0
    run_otherwise: int = 0  # accepted upstream, but not as written: validate must speak
    disagreements: list[str] = dataclasses.field(default_factory=list)


def compare(
    cases: list[Case],
    program: Path,
    kind: str,
    effective: Callable[[dict[str, Any]], Any],
    faithful: Callable[[Any, Any], bool],
) -> Tally:
    canonical = [to_yaml(c.intent).encode() for c in cases]
    written = [to_bytes(c.intent, c.style) for c in cases]
    verdicts = oracle.verdicts(program, canonical + written)
    allowed = deliberate_codes()
    tally = Tally()
    for index, case in enumerate(cases):
        base, spelt = verdicts[index], verdicts[len(cases) + index]
        faithful_base = base["accepted"] and faithful(case.intent, effective(base))
        meant = faithful_base and not case.respelt_map_keys
        # the Helm chart's MPS_ROOT overrides the file's mpsRoot: the deployment's doing
        as_deployed = base["accepted"] and faithful(_without_mps_root(case.intent), effective(base))
        for raw, verdict in ((canonical[index], base), (written[index], spelt)):
            tally.files += 1
            text = _decoded(raw)
            report = validation.validate_text(text, "drawn.yaml", kind)
            errors = [f for f in report.findings if f.severity is Severity.ERROR]
            if not verdict["accepted"]:
                _refused(tally, text, verdict, report)
            elif meant and verdict["accepted"] and effective(verdict) == effective(base):
                tally.accepted_as_meant += 1
                if verdict.get("sharingStrategy") in ("time-slicing", "mps"):
                    tally.sharing_gpus += 1
                wrong = [f for f in errors if f.code not in allowed]
                if wrong:
                    tally.disagreements.append(
                        _show("upstream runs it as written, validate refuses", text, "", report)
                    )
            elif (
                verdict is base
                and not as_deployed
                or (
                    verdict is spelt
                    and faithful_base
                    and _names_folded(effective(verdict)) != _names_folded(effective(base))
                )
            ):
                tally.run_otherwise += 1
                if not report.findings:
                    tally.disagreements.append(
                        _show(
                            "upstream runs another config than the one written, validate is silent",
                            text,
                            json.dumps(effective(verdict)),
                            report,
                        )
                    )
    record(tally, program.name)
    return tally


def _refused(
    tally: Tally, text: str, verdict: dict[str, Any], report: validation.FileReport
) -> None:
    """A file upstream refuses: `validate` must err, for the same class of reason."""
    tally.refused_by_upstream += 1
    why = reasons.upstream_class(verdict)
    errors = [f.code for f in report.findings if f.severity is Severity.ERROR]
    if not errors:
        tally.disagreements.append(
            _show("upstream refuses, validate accepts", text, verdict["error"], report)
        )
    elif not reasons.stands_for(errors, why):
        tally.disagreements.append(
            _show(f"upstream refuses ({why}), validate for another reason", text,
                  verdict["error"], report)
        )  # fmt: skip
    else:
        tally.same_reason += 1


def _names_folded(effective: Any) -> Any:
    """A mig-parted config with its config names case-folded: a respelt name is just another
    name, as written (the spelling of a key that is data, not a field)."""
    configs = effective.get("mig-configs") if isinstance(effective, dict) else None
    if not isinstance(configs, dict):
        return effective
    return {**effective, "mig-configs": {str(k).casefold(): v for k, v in configs.items()}}


def _without_mps_root(intent: Any) -> Any:
    flags = intent.get("flags") if isinstance(intent, dict) else None
    if not isinstance(flags, dict) or "mpsRoot" not in flags:
        return intent
    return {**intent, "flags": {k: v for k, v in flags.items() if k != "mpsRoot"}}


def _decoded(raw: bytes) -> str:
    try:
        return documents.decode(raw)
    except UnicodeDecodeError:  # never drawn: every encoding written is text
        raise AssertionError(raw[:40]) from None


def _show(what: str, text: str, upstream: str, report: validation.FileReport) -> str:
    _save(what, text, upstream)
    ours = "\n".join(
        f"  {f.severity.value} {f.code} line {f.line}: {f.message}" for f in report.findings
    )
    ours = ours or "  (nothing)"
    return f"{what}\n--- file ---\n{text}--- upstream: {upstream}\n--- validate:\n{ours}"


def _save(what: str, text: str, upstream: str) -> None:
    """Keep a disagreeing file in $KUBECTL_GPU_DIFFERENTIAL_SAVE, to review for corpus/."""
    target = os.environ.get("KUBECTL_GPU_DIFFERENTIAL_SAVE")
    if target:
        name = hashlib.sha256(text.encode()).hexdigest()[:12]
        note = f"# found: {what}\n# upstream said: {upstream or 'accepted'}\n"
        Path(target, f"{name}.yaml").write_text(note + text, "utf-8")


def record(tally: Any, oracle_name: str) -> None:
    """Append a batch's figures (any oracle's tally: a dataclass with `disagreements`) to
    $KUBECTL_GPU_DIFFERENTIAL_REPORT, for the docs."""
    target = os.environ.get("KUBECTL_GPU_DIFFERENTIAL_REPORT")
    if target:
        with open(target, "a", encoding="utf-8") as out:
            figures = dataclasses.asdict(tally)
            figures["disagreements"] = len(tally.disagreements)
            figures["oracle"] = oracle_name
            out.write(json.dumps(figures) + "\n")


def same(
    intent: Any,
    effective: Any,
    normalise: Callable[[tuple[Any, ...], Any], Any],
    path: tuple[Any, ...] = (),
) -> bool:
    """True when everything in `intent` is in `effective` with the same value.

    Go's JSON output leaves out empty values (omitempty), so an absent or null effective
    value matches an empty intent value (false, 0, "", [], {}).
    """
    intent = normalise(path, intent)
    if effective is MISSING or effective is None:
        return intent in (False, 0, "", [], {}) and intent is not True
    if isinstance(intent, dict):
        if not isinstance(effective, dict):
            return False
        return all(
            same(value, effective.get(key, MISSING), normalise, (*path, key))
            for key, value in intent.items()
        )
    if isinstance(intent, list):
        return (
            isinstance(effective, list)
            and len(intent) == len(effective)
            and all(
                same(a, b, normalise, (*path, i))
                for i, (a, b) in enumerate(zip(intent, effective, strict=True))
            )
        )
    if isinstance(intent, bool) or isinstance(effective, bool):
        return type(intent) is type(effective) and intent == effective
    return bool(intent == effective)
