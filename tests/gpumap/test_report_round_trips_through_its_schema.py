"""A node report built from the join's inputs keeps what `map` needs, matches its schema, comes
back unchanged from its dict, and hashes the same whenever the node's state is the same."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import jsonschema
import pytest

from kubectl_gpu import __version__
from kubectl_gpu.gpumap import clustermap, join, report
from kubectl_gpu.gpumap.allocations import Allocation, Source
from kubectl_gpu.gpumap.report import InventoryGpu, MigInstance, Placement
from tests.conftest import ROOT
from tests.gpumap import reportbuilders as b

SCHEMA = json.loads((ROOT / "schemas" / "node-report.v1.json").read_text())


def mig_report(now: dt.datetime = b.NOW, replicas: int = 2) -> report.NodeReport:
    gpu = InventoryGpu(
        0,
        b.uuid("GPU", 0),
        b.A100,
        minor=0,
        memory_mib=40960,
        mig_mode=report.MIG_ENABLED,
        mig_devices=(MigInstance(b.uuid("MIG", 1), "3g.20gb", 2, 0, Placement(4, 4)),),
    )
    ids = [f"{b.uuid('MIG', 1)}::{n}" for n in range(replicas)]
    held = (b.held("p0", ids[:1], "nvidia.com/mig-3g.20gb"),)
    healthy = b.healthy({"nvidia.com/mig-3g.20gb": ids})
    return report.build(
        "gpu-a", [gpu], join.NodeSources(podresources=held, allocatable=healthy), now
    )


def document(node_report: report.NodeReport) -> dict[str, Any]:
    return {"apiVersion": report.API_VERSION, "kind": report.KIND, **node_report.to_dict()}


def test_the_report_validates_against_its_schema_and_names_the_agent_version() -> None:
    doc = document(mig_report())

    jsonschema.validate(doc, SCHEMA, format_checker=jsonschema.FormatChecker())
    status = doc["status"]
    assert status["agentVersion"] == __version__
    assert (status["gpuCount"], status["allocationCount"]) == (1, 1)
    assert status["gpus"][0]["migDevices"][0]["placement"] == {"start": 4, "size": 4}


def test_a_report_comes_back_unchanged_from_its_dict() -> None:
    built = mig_report()

    assert report.from_dict(document(built)) == built


def test_the_digest_ignores_the_time_but_not_the_allocations() -> None:
    first, later = mig_report(), mig_report(b.NOW + dt.timedelta(hours=3))

    assert first.generated_at != later.generated_at
    assert first.digest == later.digest
    assert mig_report(replicas=3).digest != first.digest


def test_the_report_keeps_the_checkpoint_pod_uid_podresources_lacks() -> None:
    gpu = b.gpus(1)[0]
    live = Allocation(
        None, "ml", "train", "cuda", "nvidia.com/gpu", (gpu.uuid,), Source.PODRESOURCES
    )
    saved = Allocation(
        "uid-1", None, None, "cuda", "nvidia.com/gpu", (gpu.uuid,), Source.CHECKPOINT
    )
    sources = join.NodeSources(checkpoint=(saved,), podresources=(live,))

    built = report.build("gpu-a", [gpu], sources, b.NOW)

    [allocation] = built.allocations
    assert (allocation.pod_uid, allocation.pod, allocation.source) == (
        "uid-1",
        "train",
        Source.PODRESOURCES,
    )


def test_a_checkpoint_only_report_maps_like_the_offline_map() -> None:
    gpu = b.gpus(1)[0]
    saved = Allocation(
        "uid-1", None, None, "cuda", "nvidia.com/gpu", (gpu.uuid,), Source.CHECKPOINT
    )
    built = report.build("gpu-a", [gpu], join.NodeSources(checkpoint=(saved,)), b.NOW)

    cluster_map = clustermap.make([report.from_dict(document(built))], [], [], b.NOW)

    [row] = cluster_map.rows
    assert (row.row.source, row.row.pod_uid, row.row.gpu_index) == ("checkpoint", "uid-1", 0)
    assert row.age_seconds == 0


@pytest.mark.parametrize(
    "broken",
    [
        {"spec": {"node": "gpu-a"}},
        {"spec": {"node": "gpu-a"}, "status": {"agentVersion": 1}},
        {"spec": {}, "status": {}},
        {"spec": {"node": "x"}, "status": {**document(mig_report())["status"], "gpus": "none"}},
    ],
    ids=["no-status", "version-not-text", "no-node", "gpus-not-a-list"],
)
def test_a_malformed_report_is_a_report_error(broken: dict[str, Any]) -> None:
    with pytest.raises(report.ReportError):
        report.from_dict(broken)


def test_the_age_of_each_report_is_counted_from_its_generation() -> None:
    built = mig_report()

    cluster_map = clustermap.make([built], [], [], b.NOW + dt.timedelta(minutes=5))

    assert {r.age_seconds for r in cluster_map.rows} == {300.0}
    assert {r.to_dict()["observed_at"] for r in cluster_map.rows} == {"2026-05-01T12:00:00Z"}
