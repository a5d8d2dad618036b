"""`python -m tests.kit.cluster --layout gpu-operator` runs the GPU Operator's MIG manager (its
stand-in) by default, as a GPU Operator install does, so that a new user trying
`kubectl gpu mig apply` there sees it succeed through the operator; it used to render no MIG
manager, and the change waited for an actuator that never came. `--no-mig-manager` leaves it
out."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.harness.test_sim_demo_command_serves_until_sigterm import read_line, stderr_of
from tests.kit.kube.kubectl import KubectlRunner

pytestmark = pytest.mark.timeout(300)
ROOT = Path(__file__).resolve().parents[2]
CONFIGS = {"all-3g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]}


def test_mig_apply_succeeds_on_the_simulated_operator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `kubectl gpu` finds this checkout's console script, as pip puts it on PATH
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    kubeconfig = tmp_path / "kubeconfig"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [
        sys.executable, "-m", "tests.kit.cluster", "--kubeconfig", str(kubeconfig),
        "--layout", "gpu-operator", "--nodes", "gpu-1=A100-SXM4-80GB:2", "--no-agents",
        "--no-node-networks", "--no-gpu-processes",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = read_line(process, timeout=150)
        assert line.startswith("ready: "), line + stderr_of(process)
        fields = dict(f.split("=", 1) for f in line.split()[1:])
        kubectl = KubectlRunner(fields["kubectl"], kubeconfig, tmp_path / "kubectl")
        config = tmp_path / "mig.yaml"
        config.write_text(yaml.safe_dump({"version": "v1", "mig-configs": CONFIGS}))
        managers = kubectl("get", "daemonsets", "-n", "gpu-operator", "-o", "name")
        assert "daemonset.apps/nvidia-mig-manager" in managers.stdout.split()

        # a plugin takes no flag before its name: the kubeconfig goes by KUBECONFIG
        applied = subprocess.run(
            [fields["kubectl"], "gpu", "mig", "apply", "-f", str(config), "-c", "all-3g",
             "--node", "gpu-1", "--wait", "--timeout", "90s", "-o", "json"],
            env={**kubectl.env, "KUBECONFIG": str(kubeconfig)}, capture_output=True, text=True,
            timeout=150, check=False,
        )  # fmt: skip

        assert applied.returncode == 0, applied.stderr
        [row] = json.loads(applied.stdout)["nodes"]
        assert (row["actuator"], row["result"]) == ("gpu-operator", "success")
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)  # reaps it and closes its pipes
