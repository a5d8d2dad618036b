"""`kubectl gpu mig apply --wait` stopped while it waits (Ctrl-C, SIGTERM from a cancelled CI
job, SIGHUP from a closed terminal), through the real kubectl: it says which nodes it asked
and how to finish or undo, and exits 128 + the signal, never click's "Aborted!" (1)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from kubectl_gpu import keys
from tests.agent.fixtures import agent_pod
from tests.journey.fixtures import environment
from tests.kit.cluster import SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import layouts

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(120)]
BALANCED = [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]


def stopped_while_waiting(cluster: SimCluster, tmp_path: Path, signum: int) -> tuple[int, str]:
    """Start `mig apply --wait`, send `signum` once it waits, return its exit code and stderr."""
    binary = shutil.which("kubectl")
    if binary is None:
        pytest.skip("no kubectl binary on PATH")
    config = tmp_path / "mig.yaml"
    config.write_text(json.dumps({"version": "v1", "mig-configs": {"all-3g": BALANCED}}))
    command = [binary, "gpu", "mig", "apply", "-f", str(config), "-c", "all-3g",
               "--node", "gpu-1", "--wait", "--timeout", "10m"]  # fmt: skip
    env = environment(cluster, tmp_path)
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env) as process:
        assert process.stderr is not None
        said = []
        for line in process.stderr:  # progress goes to stderr as it happens
            said.append(line)
            if "asking kubectl gpu's agent" in line:
                time.sleep(0.3)  # into the wait
                process.send_signal(signum)
                break
        rest = process.stderr.read()
        return process.wait(30), "".join(said) + rest


@pytest.mark.parametrize(
    ("signum", "code"),
    [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)],
    ids=["ctrl-c", "sigterm", "hangup"],
)
def test_a_stopped_wait_says_which_nodes_it_asked_and_exits_with_the_signal(
    sim_cluster: MakeSimCluster, tmp_path: Path, signum: int, code: int
) -> None:
    cluster = sim_cluster(["gpu-1=A100-SXM4-80GB:2"], layouts.helm(env={"MIG_STRATEGY": "mixed"}))
    agent_pod(cluster, "gpu-1")  # its pod runs, but nothing answers: the wait goes on

    status, stderr = stopped_while_waiting(cluster, tmp_path, signum)

    assert status == code, stderr
    assert "Aborted!" not in stderr and "Traceback" not in stderr
    assert (
        "error: mig apply was interrupted after asking gpu-1 for config all-3g; their MIG "
        "actuator goes on by itself"
    ) in stderr
    assert "to finish, run the same command again" in stderr
    assert "to undo, apply the config each had before: gpu-1: none (MIG as it was)" in stderr
    labels = cluster.client.get("nodes", "gpu-1")["metadata"]["labels"]
    assert labels[keys.MIG_DESIRED_LABEL] == "all-3g"  # what it said it wrote
