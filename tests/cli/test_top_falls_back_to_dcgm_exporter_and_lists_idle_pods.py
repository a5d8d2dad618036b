"""`kubectl gpu top` without an agent reads dcgm-exporter's pods (as the GPU Operator runs
them) through the same pod proxy, saying which figures are device copies; `--idle` names the
pods that held a device and used nothing over the window. Real control plane; the pod proxy's
answers come from the proxy in front of it (tests/cli/topcluster.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from kubectl_gpu.usage import samples
from tests.cli import topcluster as t
from tests.conftest import ROOT, CliResult
from tests.kit.cluster import SimCluster

Run = Callable[..., CliResult]
DATA = ROOT / "tests" / "data" / "dcgm-exporter"
PER_PROCESS_IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-ubuntu22.04"
OLD_IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04"


@pytest.fixture
def proxy(real: SimCluster, tmp_path: Path) -> Iterator[tuple[t.PodProxyAnswers, Path]]:
    with t.answering_proxy(real, tmp_path) as answered:
        yield answered


def exporter_on(real: SimCluster, node: str, image: str, per_process: bool) -> str:
    t.ensure_namespace(real, "gpu-operator")
    name = f"nvidia-dcgm-exporter-{node}"
    container: dict[str, Any] = {
        "name": "nvidia-dcgm-exporter",
        "image": image,
        "ports": [{"name": "metrics", "containerPort": 9400}],
    }
    if per_process:
        container["env"] = [{"name": "KUBERNETES_VIRTUAL_GPUS", "value": "true"}]
    spec = {"containers": [container], "hostPID": per_process}
    t.running_pod(real, name, node, "gpu-operator", {"app": "nvidia-dcgm-exporter"}, spec)
    return name


def setup(
    real: SimCluster, answers: t.PodProxyAnswers, image: str, fixture: str, own: bool
) -> None:
    t.gpu_node(real, "gpu-1", "time-slicing")
    for pod in ("train-a", "train-b", "small"):
        t.running_pod(real, pod, "gpu-1")
    exporter = exporter_on(real, "gpu-1", image, own)
    answers.answers[(exporter, "/metrics")] = t.Answer(body=(DATA / fixture).read_bytes())


def test_copied_figures_are_said_to_be_the_devices(
    run_cli: Run, real: SimCluster, proxy: tuple[t.PodProxyAnswers, Path]
) -> None:
    answers, kubeconfig = proxy
    setup(real, answers, OLD_IMAGE, "time-sliced-copied.prom", own=False)

    result = run_cli("--kubeconfig", str(kubeconfig), "top", "-A")

    assert result.exit_code == 0, result.stderr
    assert (
        "GPU use from dcgm-exporter" in result.stderr
        and "copies each device's figures" in result.stderr
    )
    line = next(x for x in result.stdout.splitlines() if "default/train-a" in x)
    assert "(device)" in line and "16.0Gi" not in line
    assert "/api/v1/namespaces/gpu-operator/pods/nvidia-dcgm-exporter-gpu-1:9400/proxy/metrics" in (
        answers.asked
    )


def test_per_process_values_are_shown_as_the_pods_own(
    run_cli: Run, real: SimCluster, proxy: tuple[t.PodProxyAnswers, Path]
) -> None:
    answers, kubeconfig = proxy
    setup(real, answers, PER_PROCESS_IMAGE, "time-sliced-per-process.prom", own=True)

    result = run_cli("--kubeconfig", str(kubeconfig), "top", "-A", "-o", "json")

    assert result.exit_code == 0, result.stderr
    schema = json.loads((ROOT / "schemas" / "gpu-top.v1.json").read_text())
    jsonschema.validate(result.json, schema)
    pods = {r["pod"]: r for r in result.json["items"] if r["kind"] == "pod"}
    assert pods["train-a"]["memoryUsedBytes"] == 12 * t.GIB and pods["train-a"]["smPercent"] == 60
    assert not pods["train-a"]["copied"]
    assert result.json["source"] == {
        **result.json["source"],
        "kind": "dcgm-exporter",
        "perProcess": True,
    }


def test_idle_lists_holders_that_used_nothing_over_the_window(
    run_cli: Run, real: SimCluster, proxy: tuple[t.PodProxyAnswers, Path]
) -> None:
    answers, kubeconfig = proxy
    t.gpu_node(real, "gpu-1")
    agent = t.agent_pod(real, "gpu-1")
    answers.answers[(agent, "/v1/usage")] = t.Answer(body=t.usage_doc("gpu-1", [], [], []))
    ring = samples.Ring(60)
    now = 1_800_000_000.0
    for i in range(40):  # one a minute for 40 minutes
        at = now - (39 - i) * 60
        ring.add(
            [
                (
                    samples.Holder("GPU-a::0", "default", "lazy", "u1", "main"),
                    samples.Sample(at, 0, None, "no-samples"),
                ),
                (
                    samples.Holder("GPU-a::1", "default", "busy", "u2", "main"),
                    samples.Sample(at, 2**30, 40 if i == 30 else 0),
                ),
                (
                    samples.Holder("MIG-x", "ml", "holder", "u3", "main"),
                    samples.Sample(at, 0, None, "mig"),
                ),
            ]
        )
    document = samples.to_dict("gpu-1", "2027-01-15T08:00:00Z", 60, ring)
    document["readAt"] = "2027-01-15T08:00:00Z"
    answers.answers[(agent, "/v1/idle")] = t.Answer(body=_shifted(document, now))

    result = run_cli("--kubeconfig", str(kubeconfig), "top", "-A", "--idle", "30m", "-o", "json")

    assert result.exit_code == 0, result.stderr
    idle = {r["pod"]: r for r in result.json["items"]}
    assert set(idle) == {"lazy", "holder"}
    assert idle["lazy"]["idleSeconds"] >= 30 * 60 and idle["holder"]["smKnown"] is False
    longer = run_cli("--kubeconfig", str(kubeconfig), "top", "-A", "--idle", "2h", "-o", "json")
    assert longer.json["items"] == []  # watched for 40 minutes only: not long enough to say


def _shifted(document: dict[str, Any], now: float) -> bytes:
    """The samples' times moved so that the newest is the document's readAt."""
    import datetime as dt

    read_at = dt.datetime(2027, 1, 15, 8, 0, tzinfo=dt.timezone.utc).timestamp()
    for device in document["devices"]:
        for sample in device["samples"]:
            sample[0] = sample[0] - now + read_at
    return json.dumps(document).encode()
