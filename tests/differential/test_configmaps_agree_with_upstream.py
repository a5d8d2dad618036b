"""ConfigMaps as people hold them, judged by the oracle on the file each key mounts.

A node mounts each key of a ConfigMap as a file (`data` as UTF-8 text, `binaryData` as the
bytes its base64 holds): the device plugin reads the one its label selects, the GPU Operator's
MIG manager hands its key to mig-parted. So every corpus file of either oracle is put in a
ConfigMap, under `data` where it is UTF-8
text and under `binaryData` always, alone, in a `kubectl get cm -o yaml` List and beside a
Deployment: `validate` must find an error under a key exactly where the oracle refuses that
key's file (for the same reason), and only the deliberate ones where it runs as written.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from kubectl_gpu import validation
from kubectl_gpu.findings import Severity
from tests.differential import agreement, oracle, reasons
from tests.differential.test_past_disagreements_stay_fixed import FILES, header

pytestmark = pytest.mark.timeout(600)
DEPLOYMENT = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec: {}\n"
ORACLES = {"device-plugin": "device_plugin_oracle", "mig-parted": "mig_parted_oracle"}


def _judged(name: str) -> list[Path]:
    return [
        f
        for f in FILES
        if header(f)["oracle"] == name
        and header(f)["upstream"] != "runs, not as written"
        and "kind" not in header(f)
        and "matches" not in header(f)  # device filters: judged in the corpus test
    ]


def _configmap(values: dict[str, bytes]) -> dict[str, Any]:
    data, binary = {}, {}
    for key, raw in values.items():
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = ""
        if text and "\ufeff" not in text and key.startswith("d"):
            data[key] = text
        else:
            binary[key] = base64.b64encode(raw).decode()
    cm: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}}
    if data:
        cm["data"] = data
    if binary:
        cm["binaryData"] = binary
    return cm


@pytest.mark.parametrize("tool", sorted(ORACLES))
@pytest.mark.parametrize("holder", ["configmap", "list", "beside-a-deployment"])
def test_each_key_gets_the_verdict_of_the_file_it_mounts(
    holder: str, tool: str, request: pytest.FixtureRequest
) -> None:
    judged = _judged(tool)
    program = request.getfixturevalue(ORACLES[tool])
    raws = [f.read_bytes() for f in judged]
    verdicts = dict(zip(judged, oracle.verdicts(program, raws), strict=True))
    values = {f"d{i}": f.read_bytes() for i, f in enumerate(judged)}
    values |= {f"b{i}": f.read_bytes() for i, f in enumerate(judged)}
    cm = _configmap(values)
    assert "binaryData" in cm and "data" in cm
    at: tuple[Any, ...] = ()
    text = json.dumps(cm)
    if holder == "list":
        text, at = json.dumps({"apiVersion": "v1", "kind": "List", "items": [cm]}), ("items", 0)
    elif holder == "beside-a-deployment":
        text = DEPLOYMENT + "---\n" + text
    report = validation.validate_text(text, "cm.yaml")
    allowed = agreement.deliberate_codes()
    wrong = []
    for key in values:
        path = Path(judged[int(key[1:])])
        verdict, meta = verdicts[path], header(path)
        where = "data" if key in cm.get("data", {}) else "binaryData"
        prefix = (*at, where, key)
        codes = [
            f.code
            for f in report.findings
            if f.severity is Severity.ERROR and f.path[: len(prefix)] == prefix
        ]
        if not verdict["accepted"]:
            if not reasons.stands_for(codes, reasons.upstream_class(verdict)):
                wrong.append((path.name, where, "refused upstream", codes))
        elif set(codes) - allowed or set(codes) != set(meta.get("validate", "").split()[1:]):
            wrong.append((path.name, where, "runs as written", codes))
    assert not wrong
    others = [
        f
        for f in report.findings
        if f.path[: len(at) + 1] not in ((*at, "data"), (*at, "binaryData"))
    ]
    assert [f.code for f in others] == (
        ["document.skipped"] if holder == "beside-a-deployment" else []
    )
