"""`mig apply --dry-run` shows per node the pods the change hits (from the agent's report: a
pod on a GPU whose MIG devices change, even when its resource grows; from requests: a resource
that disappears), capacity before → after, and the Pending pods that would fit afterwards.
Without --dry-run, --drain or --force, such a change is refused with the pods' names."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest
import yaml

from kubectl_gpu import keys
from tests.agent.fixtures import agent_pod
from tests.cli.test_map_cluster_on_a_simulated_mig_node import mig_pod, publish_from_node
from tests.conftest import ROOT, CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

Run = Callable[..., CliResult]
pytestmark = pytest.mark.timeout(120)  # clusters on the real control plane
SCHEMA = json.loads((ROOT / "schemas" / "mig-apply-result.v1.json").read_text())
MIXED = "version: v1\nflags:\n  migStrategy: mixed\n"
ALL_3G = {"version": "v1", "mig-configs": {"all-3g": [
    {"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}
]}}  # fmt: skip


@pytest.fixture
def busy(sim_cluster: MakeSimCluster) -> SimCluster:
    """GPU 0 split into 3g.40gb + 1g.10gb with pod `big` on the 3g; GPU 1 whole, held by
    `whole`; `waiting` asks for two 3g.40gb and is Pending. The agent's report is published."""
    spec = NodeSpec("gpu-a", "A100-SXM4-80GB", 2, mig={0: ["3g.40gb", "1g.10gb"]})
    cluster = sim_cluster([spec], "helm", {"mixed": MIXED}, "mixed")
    agent_pod(cluster, "gpu-a")
    for name, resource in (("big", "nvidia.com/mig-3g.40gb"), ("whole", "nvidia.com/gpu")):
        cluster.client.create(mig_pod(name, resource))
    cluster.settle()
    waiting = mig_pod("waiting", "nvidia.com/mig-3g.40gb")
    waiting["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/mig-3g.40gb"] = "2"
    cluster.client.create(waiting)
    cluster.settle()
    publish_from_node(cluster, "gpu-a")
    report_gpus(cluster, "gpu-a")
    return cluster


def report_gpus(cluster: SimCluster, node: str) -> None:
    """The agent's note of its GPUs, which `mig apply` checks the config against."""
    gpus = [
        {"index": g.index, "pci": "0x20B210DE", "name": g.name} for g in cluster.node_gpus(node)
    ]
    body = {"metadata": {"annotations": {keys.MIG_GPUS_ANNOTATION: json.dumps(gpus)}}}
    cluster.client.patch("nodes", node, body)


def apply(run_cli: Run, cluster: SimCluster, tmp_path: Path, *args: str) -> CliResult:
    config = tmp_path / "mig.yaml"
    config.write_text(yaml.safe_dump(ALL_3G))
    base = ("--kubeconfig", str(cluster.kubeconfig), "mig", "apply", "-f", str(config))
    return run_cli(*base, "-c", "all-3g", "--node", "gpu-a", *args)


def test_dry_run_names_the_pods_hit_the_capacity_and_who_would_fit(
    run_cli: Run, busy: SimCluster, tmp_path: Path
) -> None:
    result = apply(run_cli, busy, tmp_path, "--dry-run=client", "--force", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert result.json["kind"] == "List"  # the objects a real run writes, as kubectl lists them
    assert [o["kind"] for o in result.json["items"]] == ["ConfigMap", "Node"]
    jsonschema.validate(
        result.json["preview"], {**SCHEMA["$defs"]["preview"], "$defs": SCHEMA["$defs"]}
    )
    [node] = result.json["preview"]["nodes"]
    assert node["capacity"] == [
        {"resource": "nvidia.com/gpu", "before": 1, "after": 0},
        {"resource": "nvidia.com/mig-1g.10gb", "before": 1, "after": 0},
        {"resource": "nvidia.com/mig-3g.40gb", "before": 1, "after": 4},
    ]
    assert node["podsHit"] == [
        # the 3g.40gb resource grows, but the device `big` holds is destroyed
        {"pod": "default/big", "why": "holds nvidia.com/mig-3g.40gb on GPU 0, which is changed"},
        {"pod": "default/whole", "why": "holds nvidia.com/gpu on GPU 1, which is changed"},
    ]
    assert result.json["preview"]["pendingPodsThatWouldFit"] == [
        {"pod": "default/waiting", "node": "gpu-a"}
    ]


def test_dry_run_table_tells_the_same_on_stderr(
    run_cli: Run, busy: SimCluster, tmp_path: Path
) -> None:
    result = apply(run_cli, busy, tmp_path, "--dry-run=server")
    assert result.exit_code == 1  # as the real run: refused, naming the pods
    assert "node gpu-a: refused: pods would lose their GPUs: default/big, default/whole" in (
        result.stderr
    )
    assert (
        "node gpu-a: nvidia.com/gpu 1 → 0, nvidia.com/mig-1g.10gb 1 → 0, "
        "nvidia.com/mig-3g.40gb 1 → 4" in result.stderr
    )
    assert "  hits pod default/whole: holds nvidia.com/gpu on GPU 1, which is changed" in (
        result.stderr
    )
    assert "Pending pod default/waiting would fit on gpu-a" in result.stderr


def test_a_change_that_hits_pods_is_refused_with_their_names(
    run_cli: Run, busy: SimCluster, tmp_path: Path
) -> None:
    result = apply(run_cli, busy, tmp_path)
    assert result.exit_code == 1
    assert (
        "node gpu-a: refused: pods would lose their GPUs: default/big, default/whole; "
        "evict them first with --drain, or change the GPUs under them with --force"
    ) in result.stderr
    labels = busy.client.get("nodes", "gpu-a")["metadata"]["labels"]
    assert keys.MIG_DESIRED_LABEL not in labels  # nothing was written

    forced = apply(run_cli, busy, tmp_path, "--force")
    assert forced.exit_code == 0, forced.stderr
    labels = busy.client.get("nodes", "gpu-a")["metadata"]["labels"]
    assert labels[keys.MIG_DESIRED_LABEL] == "all-3g"


def test_without_a_report_pods_are_judged_by_their_requests(
    run_cli: Run, sim_cluster: MakeSimCluster, tmp_path: Path
) -> None:
    spec = NodeSpec("gpu-a", "A100-SXM4-80GB", 2)
    cluster = sim_cluster([spec], "helm", {"mixed": MIXED}, "mixed")
    agent_pod(cluster, "gpu-a")
    cluster.client.create(mig_pod("whole", "nvidia.com/gpu"))
    cluster.settle()
    report_gpus(cluster, "gpu-a")
    result = apply(run_cli, cluster, tmp_path, "--dry-run=client", "-o", "json")
    [node] = result.json["preview"]["nodes"]
    assert node["podsHit"] == [
        {"pod": "default/whole", "why": "uses nvidia.com/gpu, which disappears (2 → 0)"}
    ]
    assert result.json["preview"]["pendingPodsThatWouldFit"] == []


def test_a_dry_run_gives_the_real_runs_verdict_and_exit_code(
    run_cli: Run, busy: SimCluster, tmp_path: Path
) -> None:
    real = apply(run_cli, busy, tmp_path)
    for dry in ("--dry-run", "--dry-run=client", "--dry-run=server"):
        result = apply(run_cli, busy, tmp_path, dry, "-o", "json")
        assert result.exit_code == real.exit_code == 1, (dry, result.stderr)
        jsonschema.validate(result.json, SCHEMA)
        [row] = result.json["nodes"]
        assert row["result"] == "refused" and "default/big" in row["reason"]
        assert [h["pod"] for h in result.json["preview"]["nodes"][0]["podsHit"]] == [
            "default/big", "default/whole"]  # fmt: skip
        assert not result.json["written"]
