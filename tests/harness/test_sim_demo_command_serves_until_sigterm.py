"""`python -m tests.fakes.cluster` starts a cluster kubectl can use and stops on SIGTERM."""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.apiserver.kubectl_cli import KubectlRunner

pytestmark = pytest.mark.kubectl
ROOT = Path(__file__).resolve().parents[2]


def read_line(process: subprocess.Popen[str], timeout: float) -> str:
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            return ""
    return process.stdout.readline()


def test_the_demo_cluster_answers_kubectl_and_exits_cleanly_on_sigterm(tmp_path: Path) -> None:
    binary = shutil.which("kubectl")
    if binary is None:
        pytest.skip("no kubectl on PATH")
    config = tmp_path / "ts.yaml"
    config.write_text(
        "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
        "    - name: nvidia.com/gpu\n      replicas: 2\n"
    )
    kubeconfig = tmp_path / "kubeconfig"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.fakes.cluster",
            "--kubeconfig",
            str(kubeconfig),
            "--layout",
            "helm",
            "--nodes",
            "gpu-a=H100-SXM5-80GB:2,cpu-1=none:0",
            "--config",
            f"ts={config}",
            "--default",
            "ts",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = read_line(process, timeout=15)
        assert line.startswith(f"ready: kubeconfig={kubeconfig}"), line
        kubectl = KubectlRunner(binary, kubeconfig, tmp_path / "kubectl")
        nodes = kubectl("get", "nodes", "-o", "json")
        assert nodes.returncode == 0, nodes.stderr
        items = json.loads(nodes.stdout)["items"]
        assert [n["metadata"]["name"] for n in items] == ["cpu-1", "gpu-a"]
        assert items[1]["status"]["allocatable"]["nvidia.com/gpu"] == "4"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=5)
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()
        process.stderr.close()
