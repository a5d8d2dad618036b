"""A MIG request no agent has taken (none runs, or it is restarting) is shown as waiting, not
with the state of the request before it; a timed-out `mig apply --wait` says that the request
stays and how to withdraw it."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from kubectl_gpu import keys
from tests.agent.fixtures import Agent, agent_pod
from tests.cli.test_mig_apply_reaches_allocatable import (
    BALANCED,
    STATUS_SCHEMA,
    Run,
    gpu,
    write_config,
)
from tests.kit.cluster import SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import layouts


@pytest.fixture
def cluster(sim_cluster: MakeSimCluster) -> SimCluster:
    return sim_cluster(["gpu-1=H100-SXM5-80GB:1"], layouts.helm(env={"MIG_STRATEGY": "mixed"}))


def test_a_request_no_agent_took_is_waiting_not_the_success_before_it(
    cluster: SimCluster,
    run_cli: Run,
    agent: Agent,
    tmp_path: Path,
) -> None:
    agent_pod(cluster, "gpu-1")  # its passes run below, one at a time
    config = write_config(tmp_path, balanced=BALANCED, sevens={"1g.10gb": 7})
    assert (
        gpu(cluster, run_cli, "apply", "-f", config, "-c", "balanced", "--node", "gpu-1").exit_code
        == 0
    )
    agent(cluster, "gpu-1")
    assert (
        gpu(cluster, run_cli, "apply", "-f", config, "-c", "sevens", "--node", "gpu-1").exit_code
        == 0
    )
    # the agent restarts: it has not read the node since

    status = gpu(cluster, run_cli, "status", "-o", "json")
    table = gpu(cluster, run_cli, "status")

    jsonschema.validate(status.json, STATUS_SCHEMA)
    [node] = status.json["nodes"]
    assert (node["desired"], node["state"]) == ("sevens", "waiting")
    assert node["reason"].startswith("no agent has taken up sevens yet")
    assert "success" not in table.stdout and "waiting" in table.stdout


def test_a_timed_out_apply_says_the_request_stays_and_how_to_withdraw_it(
    cluster: SimCluster,
    run_cli: Run,
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, balanced=BALANCED)
    agent_pod(cluster, "gpu-1")  # an agent pod runs there, but never takes the request up

    result = gpu(cluster, run_cli, "apply", "-f", config, "-c", "balanced", "--node", "gpu-1",
                 "--wait", "--timeout", "300ms")  # fmt: skip

    assert result.exit_code == 1
    assert "the request on gpu-1 stays" in result.stderr
    assert f"kubectl label node gpu-1 {keys.MIG_DESIRED_LABEL}-" in result.stderr
