"""The agent's probes: each pass touches a heartbeat; `--check-health` reads its age, and fails
at once when NVML cannot be initialised."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kubectl_gpu import agent
from tests.kit.cluster import NodeSpec
from tests.kit.cluster.fixture import MakeSimCluster

pytestmark = pytest.mark.timeout(120)  # clusters on the real control plane


def health(heartbeat: Path, max_age: str = "120") -> int:
    return agent.main(["--check-health", "--heartbeat", str(heartbeat), "--max-age", max_age])


def test_no_pass_yet_is_unhealthy(tmp_path: Path) -> None:
    assert health(tmp_path / "heartbeat") == 1


def test_a_recent_pass_is_healthy_and_an_old_one_is_not(tmp_path: Path) -> None:
    beat = tmp_path / "heartbeat"
    agent.beat(beat)
    assert health(beat) == 0
    old = time.time() - 300
    os.utime(beat, (old, old))
    assert health(beat) == 1
    assert health(beat, max_age="600") == 0


def test_an_agent_that_cannot_initialise_nvml_is_unhealthy(
    sim_cluster: MakeSimCluster, tmp_path: Path
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1)], controllers=())
    beat = tmp_path / "run" / "heartbeat"
    # A process of its own: the kubernetes client reads $KUBECONFIG when it is imported.
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "NODE_NAME": "gpu-a"}
    done = subprocess.run(
        [sys.executable, "-m", "kubectl_gpu.agent", "--once", "--heartbeat", str(beat)],
        env=env, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    # No NVML on this machine: the pass fails and says so, and the probes fail until a new
    # container can reach the driver (a loop that goes on without NVML does nothing useful).
    assert done.returncode == 1 and "cannot initialise NVML" in done.stderr, done.stderr
    assert health(beat) == 1
