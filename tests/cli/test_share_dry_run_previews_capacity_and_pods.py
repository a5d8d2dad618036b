"""`share --dry-run` and `--diff` show per node capacity before → after, the pods whose
resource disappears or shrinks, and the Pending GPU pods that would fit afterwards; `-o json`
carries the same beside the objects it would write."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import jsonschema
import pytest

from tests.cli.doctorpods import gpu_pod, run_pods
from tests.conftest import ROOT, CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

Run = Callable[..., CliResult]
pytestmark = pytest.mark.timeout(120)  # clusters on the real control plane
SCHEMA = json.loads((ROOT / "schemas" / "share-result.v1.json").read_text())
PREVIEW = {**SCHEMA["$defs"]["preview"], "$defs": SCHEMA["$defs"]}


@pytest.fixture
def full(sim_cluster: MakeSimCluster) -> SimCluster:
    """One L4, held by `train`; `next` waits for a GPU."""
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1, gpu_taint=True)], "gpu-operator")
    run_pods(cluster, gpu_pod("train", tolerate=True), gpu_pod("next", tolerate=True))
    assert cluster.client.get("pods", "next", "default")["status"]["phase"] == "Pending"
    return cluster


def share(run_cli: Run, cluster: SimCluster, *args: str) -> CliResult:
    return run_cli("--kubeconfig", str(cluster.kubeconfig), "share", *args)


def test_more_replicas_let_the_pending_pod_in_and_hit_nobody(
    run_cli: Run, full: SimCluster
) -> None:
    result = share(run_cli, full, "--replicas", "4", "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert "node gpu-a: nvidia.com/gpu 1 → 4" in result.stderr
    assert "hits pod" not in result.stderr
    assert "Pending pod default/next would fit on gpu-a" in result.stderr
    assert (
        "node gpu-a: per pod: time-slicing: no isolation; up to 4 pods share each GPU's memory"
        in (result.stderr)
    )


def test_an_mps_dry_run_states_each_pods_memory_cap_and_thread_share(
    run_cli: Run, full: SimCluster
) -> None:
    result = share(run_cli, full, "--mps", "--replicas", "4", "--dry-run")
    assert "node gpu-a: per pod: MPS: each pod is capped at 1/4 of its GPU's memory and 25% of " \
           "its SM threads" in result.stderr  # fmt: skip


def test_renaming_hits_the_pods_of_the_old_name_and_json_says_so(
    run_cli: Run, full: SimCluster
) -> None:
    refused = share(
        run_cli, full, "--replicas", "2", "--rename-by-default", "--dry-run=client", "-o", "json"
    )
    assert refused.exit_code == 1  # as the real run would be
    assert "  default/train: uses nvidia.com/gpu, which disappears (1 → 0)" in refused.stderr
    result = share(run_cli, full, "--replicas", "2", "--rename-by-default", "--force",
                   "--dry-run=client", "-o", "json")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert result.json["kind"] == "List" and result.json["items"]  # what a real run writes
    preview = result.json["preview"]
    jsonschema.validate(preview, PREVIEW)
    assert preview["nodes"] == [
        {
            "node": "gpu-a",
            "capacity": [
                {"resource": "nvidia.com/gpu", "before": 1, "after": 0},
                {"resource": "nvidia.com/gpu.shared", "before": 0, "after": 2},
            ],
            "podsHit": [
                {"pod": "default/train", "why": "uses nvidia.com/gpu, which disappears (1 → 0)"}
            ],
        }
    ]
    assert preview["pendingPodsThatWouldFit"] == []  # `next` asks for nvidia.com/gpu


def test_diff_shows_the_preview_too(run_cli: Run, full: SimCluster) -> None:
    result = share(run_cli, full, "--replicas", "2", "--diff")
    assert result.exit_code == 0, result.stderr
    assert "node gpu-a: nvidia.com/gpu 1 → 2" in result.stderr
    assert "Pending pod default/next would fit on gpu-a" in result.stderr


def test_every_dry_run_form_exits_as_the_real_run_and_names_the_pods(
    run_cli: Run, full: SimCluster
) -> None:
    change = ("--replicas", "2", "--rename-by-default")
    real = share(run_cli, full, *change, "--dry-run=server")  # writes nothing either way
    for dry in ("--dry-run", "--dry-run=client", "--dry-run=server", "--diff"):
        result = share(run_cli, full, *change, dry)
        assert result.exit_code == real.exit_code == 1, (dry, result.stderr)
        assert "running pods would lose their resource" in result.stderr
        assert "  default/train: uses nvidia.com/gpu, which disappears (1 → 0)" in result.stderr
    names = [c["metadata"]["name"] for c in full.client.list("configmaps", "gpu-operator")]
    assert "device-plugin-config" not in names  # nothing was written


def test_a_dry_runs_table_shows_the_capacity_after_never_none(
    run_cli: Run, full: SimCluster
) -> None:
    result = share(run_cli, full, "--replicas", "4", "--dry-run", "-o", "wide")
    assert result.exit_code == 0, result.stderr
    [header, row] = (re.split(r"\s{2,}", line.strip()) for line in result.stdout.splitlines())
    cells = dict(zip(header, row, strict=True))
    assert (cells["BEFORE"], cells["AFTER"], cells["EXPECTED"]) == ("1", "4", "4")
    assert cells["RESULT"] == "planned"
