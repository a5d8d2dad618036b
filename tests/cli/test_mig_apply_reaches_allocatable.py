"""`kubectl gpu mig apply` end to end on the simulated cluster: the CLI checks offline and writes
the request, one agent pass applies it, the device plugin restarts, the node's `nvidia.com/mig-*`
allocatable follows, and `mig status` shows it; an invalid mix is refused before anything is
written; the small-first mix that NVML's unplaced create cannot fit is applied."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest

from kubectl_gpu import keys
from tests.agent.fixtures import Agent, agent_pod, labels, notes
from tests.conftest import ROOT, CliResult
from tests.kit.cluster import SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import layouts

Run = Callable[..., CliResult]
pytestmark = pytest.mark.timeout(120)  # clusters on the real control plane
# file order small first: NVML's unplaced create would leave no room for the 3g
# (docs/upstream-facts.md M2.2)
BALANCED = {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
APPLY_SCHEMA = json.loads((ROOT / "schemas" / "mig-apply-result.v1.json").read_text())
STATUS_SCHEMA = json.loads((ROOT / "schemas" / "mig-status.v1.json").read_text())


def write_config(tmp_path: Path, **configs: dict[str, int]) -> str:
    doc = {
        "version": "v1",
        "mig-configs": {
            name.replace("_", "-"): [
                {"devices": "all", "mig-enabled": True, "mig-devices": devices}
            ]
            for name, devices in configs.items()
        },
    }
    path = tmp_path / "mig.yaml"
    path.write_text(json.dumps(doc, indent=2))
    return str(path)


def gpu(cluster: SimCluster, run_cli: Run, *args: str) -> CliResult:
    result = run_cli("--kubeconfig", str(cluster.kubeconfig), "mig", *args)
    assert result.exception is None, result.exception
    return result


@pytest.fixture
def cluster(sim_cluster: MakeSimCluster) -> SimCluster:
    return sim_cluster(["gpu-1=H100-SXM5-80GB:1"], layouts.helm(env={"MIG_STRATEGY": "mixed"}))


def test_apply_then_one_agent_pass_updates_allocatable_and_status(
    cluster: SimCluster,
    run_cli: Run,
    agent: Agent,
    tmp_path: Path,
) -> None:
    agent_pod(cluster, "gpu-1")  # its pass runs below, in the test's process
    old_pod = cluster.plugin_pod("gpu-1")
    config = write_config(tmp_path, balanced=BALANCED)

    applied = gpu(cluster, run_cli, "apply", "-f", config, "-c", "balanced", "--node", "gpu-1",
                  "-o", "json")  # fmt: skip

    assert applied.exit_code == 0, applied.stderr
    jsonschema.validate(applied.json, APPLY_SCHEMA)
    row = applied.json["nodes"][0]
    assert (row["result"], row["actuator"]) == ("requested", "kubectl-gpu")
    assert row["resources"] == {"nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-2g.20gb": 1,
                                "nvidia.com/mig-3g.40gb": 1}  # fmt: skip
    assert labels(cluster, "gpu-1")[keys.MIG_DESIRED_LABEL] == "balanced"
    stored = cluster.client.get("configmaps", keys.MIG_CONFIGMAP, keys.NAMESPACE)["data"]
    assert json.loads(stored["balanced"])["mig-configs"]["balanced"][0]["mig-devices"] == BALANCED

    agent(cluster, "gpu-1")

    assert cluster.allocatable("gpu-1", "nvidia.com/mig-1g.10gb") == 2
    assert cluster.allocatable("gpu-1", "nvidia.com/mig-2g.20gb") == 1
    assert cluster.allocatable("gpu-1", "nvidia.com/mig-3g.40gb") == 1
    new_pod = cluster.plugin_pod("gpu-1")
    assert old_pod and new_pod and old_pod["metadata"]["uid"] != new_pod["metadata"]["uid"]
    # the mix was created with explicit placements, not NVML's unplaced create
    calls = cluster.nvml("gpu-1").calls
    assert "nvmlDeviceCreateGpuInstanceWithPlacement" in calls
    assert "nvmlDeviceCreateGpuInstance" not in calls

    status = gpu(cluster, run_cli, "status", "-o", "json")
    jsonschema.validate(status.json, STATUS_SCHEMA)
    node = status.json["nodes"][0]
    assert node["desired"] == "balanced" and node["state"] == "success"
    assert node["applied"] == row["request"]
    assert node["gpus"][0]["layout"] == "2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4"
    table = gpu(cluster, run_cli, "status")
    assert "balanced" in table.stdout and "3g.40gb@4" in table.stdout


def test_an_invalid_mix_is_refused_before_any_label_is_set(
    cluster: SimCluster, run_cli: Run, tmp_path: Path
) -> None:
    config = write_config(tmp_path, too_big={"3g.40gb": 2, "2g.20gb": 1})

    result = gpu(cluster, run_cli, "apply", "-f", config, "-c", "too-big", "--node", "gpu-1")

    assert result.exit_code == 1
    assert "does-not-fit" in result.stdout
    assert "nothing was written" in result.stderr
    assert keys.MIG_DESIRED_LABEL not in labels(cluster, "gpu-1")
    assert not cluster.client.list("configmaps", keys.NAMESPACE)  # no agent pod: no namespace


def test_wait_follows_the_agent_to_success(
    cluster: SimCluster, run_cli: Run, tmp_path: Path, background_agent: Callable[..., None]
) -> None:
    config = write_config(tmp_path, balanced=BALANCED)
    background_agent(cluster, "gpu-1")

    result = gpu(cluster, run_cli, "apply", "-f", config, "-c", "balanced", "--node", "gpu-1",
                 "--wait", "--timeout", "20s", "-o", "wide")  # fmt: skip

    assert result.exit_code == 0, result.stderr
    assert "success" in result.stdout and "3g.40gb@4" in result.stdout
    assert "node gpu-1: success (" in result.stderr  # progress on stderr, not stdout
    assert "node gpu-1" not in result.stdout.split("\n")[0]
    assert cluster.allocatable("gpu-1", "nvidia.com/mig-3g.40gb") == 1


def test_a_gpu_in_use_fails_and_is_retried_only_when_forced(
    cluster: SimCluster, run_cli: Run, tmp_path: Path, background_agent: Callable[..., None]
) -> None:
    cluster.nvml("gpu-1").add_process(0, 4242)
    config = write_config(tmp_path, balanced=BALANCED)
    background_agent(cluster, "gpu-1")
    args = (
        "apply",
        "-f",
        config,
        "-c",
        "balanced",
        "--node",
        "gpu-1",
        "--wait",
        "--timeout",
        "20s",
    )

    refused = gpu(cluster, run_cli, *args)

    assert refused.exit_code == 1
    assert "process 4242" in refused.stderr and "--force" in refused.stderr
    assert not cluster.nvml("gpu-1").gpu(0).mig_enabled
    cluster.nvml("gpu-1").stop_process(0, 4242)
    again = gpu(cluster, run_cli, *args)  # unchanged content is not retried by itself
    assert again.exit_code == 1 and "process 4242" in again.stderr

    forced = gpu(cluster, run_cli, *args, "--force")

    assert forced.exit_code == 0, forced.stderr
    assert labels(cluster, "gpu-1")[keys.MIG_STATE_LABEL] == "success"
    assert keys.MIG_FORCE_ANNOTATION not in notes(cluster, "gpu-1")  # one attempt, used up
    assert cluster.allocatable("gpu-1", "nvidia.com/mig-1g.10gb") == 2


def test_a_wait_without_an_agent_pod_is_refused_at_the_start(
    cluster: SimCluster, run_cli: Run, tmp_path: Path
) -> None:
    config = write_config(tmp_path, balanced=BALANCED)

    result = gpu(cluster, run_cli, "apply", "-f", config, "-c", "balanced", "--node", "gpu-1",
                 "--wait", "--timeout", "10m")  # fmt: skip

    assert result.exit_code == 1  # at once, not after ten minutes
    assert "refused" in result.stdout and "nothing was written" in result.stderr
    # the reason names who is missing and what to run
    assert "no kubectl-gpu agent pod runs on gpu-1, so nothing would act on the change" in (
        result.stderr
    )
    assert "kubectl gpu install" in result.stderr
    assert keys.MIG_DESIRED_LABEL not in labels(cluster, "gpu-1")
    dry = gpu(cluster, run_cli, "apply", "-f", config, "-c", "balanced", "--node", "gpu-1",
              "--wait", "--dry-run")  # fmt: skip
    assert dry.exit_code == 1 and "no kubectl-gpu agent pod" in dry.stderr
    # without --wait too: a request nobody takes up would change the GPUs whenever an agent
    # came, at a moment nobody chose
    asked = gpu(cluster, run_cli, "apply", "-f", config, "-c", "balanced", "--node", "gpu-1")
    assert asked.exit_code == 1 and "no kubectl-gpu agent pod runs on gpu-1" in asked.stderr
    assert keys.MIG_DESIRED_LABEL not in labels(cluster, "gpu-1")
    assert keys.NAMESPACE not in [n["metadata"]["name"] for n in cluster.client.list("namespaces")]


def test_wait_names_an_agent_pod_that_never_took_up_the_request(
    cluster: SimCluster, run_cli: Run, tmp_path: Path
) -> None:
    agent_pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "kubectl-gpu-agent-x1", "namespace": "kubectl-gpu",
                     "labels": {"app.kubernetes.io/name": "kubectl-gpu-agent"}},
        "spec": {"nodeName": "gpu-1", "containers": [{"name": "agent", "image": "agent"}]},
    }  # fmt: skip
    cluster.client.create({"apiVersion": "v1", "kind": "Namespace",
                          "metadata": {"name": "kubectl-gpu"}})  # fmt: skip
    cluster.client.create(agent_pod)
    cluster.settle()
    config = write_config(tmp_path, balanced=BALANCED)

    result = gpu(cluster, run_cli, "apply", "-f", config, "-c", "balanced", "--node", "gpu-1",
                 "--wait", "--timeout", "300ms")  # fmt: skip

    assert result.exit_code == 1
    assert (
        "agent pod kubectl-gpu-agent-x1 runs but never took up the request: "
        "kubectl logs -n kubectl-gpu kubectl-gpu-agent-x1"
    ) in result.stderr
