"""Every disagreement the differential suite (or a person) ever found, kept as a file.

tests/differential/corpus/ holds one small config per disagreement, with what upstream does
in its header: `# upstream: refuses CLASS` (reasons.py's classes), `# upstream: runs as
written`, or `# upstream: runs, not as written` (it starts, with another config than the one
written: `validate` must refuse it with the code named), `# validate: error CODE` where
`validate` is deliberately stricter, `# kind: auto` where the kind is to be detected, and for
mig-parted `# matches: IDS`, the PCI IDs its device filters must match. A file is bytes: it
may be UTF-16 or hold byte-order marks, and is decoded as NVIDIA's reader decodes it. Each
file is judged again on every run: the oracle must still say what the header says (else the
file or the oracle changed), and `validate` must agree for the same reason; for mig-parted,
the GPUs a spec selects must be the ones mig-parted's device-filter matcher selects.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from kubectl_gpu import documents, validation
from kubectl_gpu.findings import Severity
from kubectl_gpu.mig.spec import MigConfigFile
from tests.differential import agreement, oracle, reasons

pytestmark = pytest.mark.timeout(600)  # the first use builds the oracles (gobins)
CORPUS = Path(__file__).parent / "corpus"
FILES = sorted(CORPUS.glob("*.yaml"))
_HEADER = re.compile(r"^# (\w+): (.*)$", re.MULTILINE)


def text_of(path: Path) -> str:
    return documents.decode(path.read_bytes())


def header(path: Path) -> dict[str, str]:
    return dict(_HEADER.findall(text_of(path).lstrip("\ufeff")))


@pytest.fixture(scope="module")
def upstream(device_plugin_oracle: Path, mig_parted_oracle: Path) -> dict[Path, dict[str, Any]]:
    """The oracles' verdicts on the whole corpus, one run per oracle."""
    verdicts: dict[Path, dict[str, Any]] = {}
    for name, program in (
        ("device-plugin", device_plugin_oracle),
        ("mig-parted", mig_parted_oracle),
    ):
        files = [f for f in FILES if header(f)["oracle"] == name]
        hardware = sorted({i for f in files for i in header(f).get("matches", "").split(",") if i})
        options = ("-match", ",".join(hardware)) if hardware else ()
        raws = [f.read_bytes() for f in files]
        verdicts.update(zip(files, oracle.verdicts(program, raws, *options), strict=True))
    return verdicts


def test_the_corpus_covers_both_oracles() -> None:
    assert {header(f)["oracle"] for f in FILES} == {"device-plugin", "mig-parted"}


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_upstream_and_validate_still_agree(path: Path, upstream: dict[Path, Any]) -> None:
    meta, verdict = header(path), upstream[path]
    kind = "mig-config" if meta["oracle"] == "mig-parted" else "device-plugin-config"
    report = validation.validate_text(text_of(path), path.name, meta.get("kind", kind))
    errors = [f.code for f in report.findings if f.severity is Severity.ERROR]
    expected = meta["upstream"]
    if expected.startswith("refuses"):
        why = expected.split()[1]
        assert not verdict["accepted"] and reasons.upstream_class(verdict) == why, verdict
        assert reasons.stands_for(errors, why), (errors, verdict["error"])
        return
    deliberate = meta.get("validate", "").removeprefix("error ").split()
    assert set(deliberate) <= agreement.deliberate_codes()
    if expected == "runs, not as written":
        assert verdict["accepted"] and deliberate, verdict
        assert set(deliberate) <= set(errors), report.findings
        return
    assert expected == "runs as written" and verdict["accepted"], verdict
    assert sorted(set(errors)) == sorted(deliberate), report.findings
    if kind == "mig-config":  # the config names as mig-parted knows them (`on` is `true`)
        docs, _ = documents.load_documents(text_of(path), path.name)
        assert sorted(docs[0].data["mig-configs"]) == verdict["configs"]


@pytest.mark.parametrize("path", [f for f in FILES if "matches" in header(f)], ids=lambda f: f.stem)
def test_device_filters_select_the_gpus_mig_parted_selects(
    path: Path, upstream: dict[Path, Any]
) -> None:
    hardware = header(path)["matches"].split(",")
    (doc,), _ = documents.load_documents(text_of(path), path.name)
    model = MigConfigFile.from_dict(doc.data)
    ours = {
        f"{name}/{index}": [h for h in hardware if spec.selects(0, *_pci_ids(h))]
        for name in model.names
        for index, spec in enumerate(model.select(name))
    }
    theirs = {
        key: sorted(set(ids) & set(hardware)) for key, ids in upstream[path]["matches"].items()
    }
    assert ours == theirs


def _pci_ids(text: str) -> tuple[int, int | None]:
    """`0xDDDDVVVV` or `0xDDDDVVVV:0xSSSSVVVV` as (device+vendor, subsystem or None)."""
    primary, _, subsystem = text.partition(":")
    return int(primary, 16), int(subsystem, 16) if subsystem else None
