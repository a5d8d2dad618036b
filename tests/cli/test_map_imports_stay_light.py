"""`kubectl gpu map --help` and the offline map run without the kubernetes client, and without
gRPC: a krew-installed CLI need not carry either (docs/architecture.md, "Ports")."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import DATA, ROOT

WATCHED = ["kubernetes", "grpc", "kubectl_gpu.kubelet", "kubectl_gpu.cli.map"]
PROBE = """
import json, sys
from kubectl_gpu.cli import cli
try:
    cli.main({args!r}, standalone_mode=False)
except SystemExit:
    pass
print(json.dumps(sorted(m for m in {watched!r} if m in sys.modules)))
"""


def loaded_by(args: list[str]) -> list[str]:
    code = PROBE.format(args=args, watched=WATCHED)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


@pytest.mark.parametrize(
    "args",
    [
        ["map", "--help"],
        ["map", "--checkpoint", str(DATA / "checkpoints" / "time-sliced-4x.json")],
        ["map", "--checkpoint", str(DATA / "checkpoints" / "minikube-1gpu.json"), "-o", "json"],
    ],
    ids=["help", "table", "json"],
)
def test_map_never_loads_kubernetes_or_grpc(args: list[str]) -> None:
    loaded = loaded_by(args)

    assert "kubectl_gpu.cli.map" in loaded  # the probe really ran the command
    assert not {"kubernetes", "grpc"} & set(loaded)


def test_help_does_not_even_load_the_kubelet_adapter() -> None:
    assert "kubectl_gpu.kubelet" not in loaded_by(["map", "--help"])


def test_the_offline_map_reads_through_the_kubelet_adapter() -> None:
    args = ["map", "--checkpoint", str(DATA / "checkpoints" / "minikube-1gpu.json")]

    assert "kubectl_gpu.kubelet" in loaded_by(args)
