"""`kubectl gpu top` on the real control plane: the agents are found, the pods named and the
RBAC checked by the real API server; the agents' answers through its pod proxy come from a
proxy in front of it (tests/cli/topcluster.py), so nothing is proxied to a pod. Each sharing
form's limit, partial answers, the 403 and the missing-source message."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from kubectl_gpu.usage.readings import MigReading
from tests.cli import topcluster as t
from tests.conftest import ROOT, CliResult
from tests.kit.cluster import SimCluster

Run = Callable[..., CliResult]
SCHEMA = json.loads((ROOT / "schemas" / "gpu-top.v1.json").read_text())
GPU_A = "GPU-aaaaaaaa-1111-2222-3333-444444444444"
GPU_B = "GPU-bbbbbbbb-1111-2222-3333-444444444444"
MIG_1 = "MIG-11111111-2222-3333-4444-555555555555"


@pytest.fixture
def proxy(real: SimCluster, tmp_path: Path) -> Iterator[tuple[t.PodProxyAnswers, Path]]:
    with t.answering_proxy(real, tmp_path) as answered:
        yield answered


def top(run: Run, kubeconfig: Path, *args: str) -> CliResult:
    return run("--kubeconfig", str(kubeconfig), "top", *args)


def pod_lists(answers: t.PodProxyAnswers) -> list[str]:
    """The cluster-wide pod LISTs top sent beside the one that finds the agents by label."""
    return [
        s.path
        for s in answers.seen
        if s.path.split("?")[0] == "/api/v1/pods" and "labelSelector" not in s.path
    ]


def pods_of(result: CliResult) -> dict[str, dict[str, Any]]:
    return {r["pod"]: r for r in result.json["items"] if r["kind"] == "pod"}


def test_time_sliced_pods_show_their_own_memory_and_no_isolation(
    run_cli: Run, real: SimCluster, proxy: tuple[t.PodProxyAnswers, Path]
) -> None:
    answers, kubeconfig = proxy
    t.gpu_node(real, "gpu-1", "time-slicing")
    agent = t.agent_pod(real, "gpu-1")
    a = t.running_pod(real, "train-a", "gpu-1", container_id="a" * 64)
    b = t.running_pod(real, "train-b", "gpu-1", container_id="b" * 64)
    answers.answers[(agent, "/v1/usage")] = t.Answer(
        body=t.usage_doc(
            "gpu-1",
            [t.h100(GPU_A, 16.5, 70)],
            [
                (GPU_A, t.process(11, 12, a["metadata"]["uid"], "a" * 64, sm=60)),
                (GPU_A, t.process(12, 4, b["metadata"]["uid"], "b" * 64, sm=10)),
                (GPU_A, t.process(13, 0.5, None, sm=0)),
            ],
            [t.held(f"{GPU_A}::0", GPU_A, a, 0, 4), t.held(f"{GPU_A}::1", GPU_A, b, 1, 4)],
        )
    )

    result = top(run_cli, kubeconfig, "-A", "-o", "json")

    assert result.exit_code == 0, result.stderr
    jsonschema.validate(result.json, SCHEMA)
    pods = pods_of(result)
    assert pods["train-a"]["memoryUsedBytes"] == 12 * t.GIB
    assert pods["train-b"]["memoryUsedBytes"] == 4 * t.GIB
    assert pods["train-a"]["container"] == "main"
    assert pods["train-a"]["isolation"] == "none" and pods["train-a"]["memoryLimitBytes"] is None
    assert pods["train-a"]["neighbours"] == ["default/train-b", "pid 13 (no pod)"]
    assert any(r["kind"] == "no-pod" and r["pids"] == [13] for r in result.json["items"])
    assert result.json["source"]["kind"] == "agent"
    # the agent named every pod: no cluster-wide pod LIST (the fleet's cost is the agents')
    assert not pod_lists(answers)
    assert f"/api/v1/namespaces/{t.AGENT_NS}/pods/{agent}:9402/proxy/v1/usage" in answers.asked

    table = top(run_cli, kubeconfig, "-A")
    assert "GPU use from the kubectl-gpu agent on 1 node" in table.stderr
    line = next(x for x in table.stdout.splitlines() if "default/train-a" in x)
    assert "12.0Gi" in line and "60%" in line and "none: 2 neighbours" in line
    assert max(map(len, table.stdout.splitlines())) <= 120
    wide = top(run_cli, kubeconfig, "-A", "-o", "wide", "--no-headers")
    line = next(x for x in wide.stdout.splitlines() if "default/train-a" in x)
    assert "default/train-b,pid 13 (no pod)" in line and "main" in line and GPU_A in line
    assert not wide.stdout.startswith("NODE") and "GPU use from" not in wide.stderr


def test_mps_pods_are_capped_at_memory_over_replicas_and_their_thread_share(
    run_cli: Run, real: SimCluster, proxy: tuple[t.PodProxyAnswers, Path]
) -> None:
    answers, kubeconfig = proxy
    t.gpu_node(real, "gpu-1", "mps")
    agent = t.agent_pod(real, "gpu-1")
    a = t.running_pod(real, "infer", "gpu-1")
    answers.answers[(agent, "/v1/usage")] = t.Answer(
        body=t.usage_doc(
            "gpu-1",
            [t.h100(GPU_A, 3, 20)],
            [(GPU_A, t.process(11, 3, a["metadata"]["uid"], sm=20))],
            [t.held(f"{GPU_A}::2", GPU_A, a, 2, 4)],
        )
    )

    result = top(run_cli, kubeconfig, "-A", "-o", "json")

    infer = pods_of(result)["infer"]
    assert infer["isolation"] == "mps"
    assert (infer["memoryLimitBytes"], infer["threadPercent"]) == (20 * t.GIB, 25)


def test_a_mig_pod_is_held_to_its_instance_and_has_no_sm_figure(
    run_cli: Run, real: SimCluster, proxy: tuple[t.PodProxyAnswers, Path]
) -> None:
    answers, kubeconfig = proxy
    t.gpu_node(real, "gpu-1")
    agent = t.agent_pod(real, "gpu-1")
    a = t.running_pod(real, "small", "gpu-1")
    mig = MigReading(MIG_1, "1g.10gb", 9, 0, 10 * t.GIB, 2 * t.GIB)
    answers.answers[(agent, "/v1/usage")] = t.Answer(
        body=t.usage_doc(
            "gpu-1",
            [t.h100(GPU_A, 2, None, (mig,))],
            [(GPU_A, t.process(11, 2, a["metadata"]["uid"], gi=9, ci=0))],
            [t.held(MIG_1, GPU_A, a, mig=MIG_1, resource="nvidia.com/mig-1g.10gb")],
        )
    )

    result = top(run_cli, kubeconfig, "-A", "-o", "json")
    small = pods_of(result)["small"]
    assert small["isolation"] == "mig" and small["memoryLimitBytes"] == 10 * t.GIB
    assert small["smPercent"] is None and small["smUnavailable"] == "mig"
    assert small["device"] == "mig 1g.10gb"
    table = top(run_cli, kubeconfig, "-A")
    line = next(x for x in table.stdout.splitlines() if "default/small" in x)
    assert "n/a MIG" in line and "MIG 10.0Gi" in line


def test_a_dra_pod_is_shown_on_the_gpu_its_processes_run_on(
    run_cli: Run, real: SimCluster, proxy: tuple[t.PodProxyAnswers, Path]
) -> None:
    answers, kubeconfig = proxy
    t.gpu_node(real, "gpu-1")
    agent = t.agent_pod(real, "gpu-1")
    a = t.running_pod(real, "claimer", "gpu-1")
    dra = t.held("gpu.nvidia.com/gpu-1/gpu-0", None, a, source="dra", resource="claim:gpu")
    answers.answers[(agent, "/v1/usage")] = t.Answer(
        body=t.usage_doc(
            "gpu-1",
            [t.h100(GPU_A, 5, 30)],
            [(GPU_A, t.process(11, 5, a["metadata"]["uid"], sm=30))],
            [dra],
        )
    )

    result = top(run_cli, kubeconfig, "-A", "-o", "json")

    claimer = pods_of(result)["claimer"]
    # kubelet names a DRA pod, the cgroup gives its UID: the pods are listed to join them
    assert pod_lists(answers)
    assert claimer["device"] == "gpu-0" and claimer["deviceID"] == dra.device_id
    assert claimer["isolation"] == "whole-gpu" and claimer["memoryUsedBytes"] == 5 * t.GIB


def test_nodes_that_fail_or_do_not_answer_in_time_are_named_and_the_others_shown(
    run_cli: Run, real: SimCluster, proxy: tuple[t.PodProxyAnswers, Path]
) -> None:
    answers, kubeconfig = proxy
    for node in ("gpu-1", "gpu-2", "gpu-3"):
        t.gpu_node(real, node)
    agents = [t.agent_pod(real, n) for n in ("gpu-1", "gpu-2", "gpu-3")]
    answers.answers[(agents[0], "/v1/usage")] = t.Answer(
        body=t.usage_doc("gpu-1", [t.h100(GPU_A, 1, 5)], [], [])
    )
    answers.answers[(agents[1], "/v1/usage")] = t.Answer(hang=5, body=b"{}")
    answers.answers[(agents[2], "/v1/usage")] = t.Answer(
        503,
        b'{"kind":"Status","apiVersion":"v1","status":"Failure","message":"error trying '
        b'to reach service: dial tcp 10.1.2.3:9402: connect: connection refused","code":503}',
    )

    result = top(run_cli, kubeconfig, "-A", "--node-timeout", "1s", "-o", "json")

    assert result.exit_code == 1
    jsonschema.validate(result.json, SCHEMA)
    assert [r["node"] for r in result.json["items"]] == ["gpu-1"]
    failed = {f["node"]: f["reason"] for f in result.json["failedNodes"]}
    assert set(failed) == {"gpu-2", "gpu-3"}
    assert "did not finish its answer within 1s" in failed["gpu-2"]
    assert "connection refused" in failed["gpu-3"]
    assert "2 node(s) did not answer: gpu-2, gpu-3" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_answer_that_is_not_a_usage_document_fails_that_node_only(
    run_cli: Run, real: SimCluster, proxy: tuple[t.PodProxyAnswers, Path]
) -> None:
    answers, kubeconfig = proxy
    t.gpu_node(real, "gpu-1")
    agent = t.agent_pod(real, "gpu-1")
    answers.answers[(agent, "/v1/usage")] = t.Answer(body=json.dumps({"kind": "Other"}).encode())

    result = top(run_cli, kubeconfig, "-A")

    assert result.exit_code == 1
    assert (
        "node gpu-1: agent pod kubectl-gpu/kubectl-gpu-agent-gpu-1 answered something "
        "unreadable" in result.stderr
    )


def test_top_pod_shows_that_pod_and_its_gpu(
    run_cli: Run, real: SimCluster, proxy: tuple[t.PodProxyAnswers, Path]
) -> None:
    answers, kubeconfig = proxy
    t.gpu_node(real, "gpu-1", "time-slicing")
    agent = t.agent_pod(real, "gpu-1")
    a = t.running_pod(real, "train-a", "gpu-1")
    b = t.running_pod(real, "train-b", "gpu-1")
    answers.answers[(agent, "/v1/usage")] = t.Answer(
        body=t.usage_doc(
            "gpu-1",
            [t.h100(GPU_A, 3, 10)],
            [
                (GPU_A, t.process(11, 1, a["metadata"]["uid"])),
                (GPU_A, t.process(12, 2, b["metadata"]["uid"])),
            ],
            [t.held(f"{GPU_A}::0", GPU_A, a, 0, 2), t.held(f"{GPU_A}::1", GPU_A, b, 1, 2)],
        )
    )

    result = top(run_cli, kubeconfig, "pod", "train-b", "-n", "default", "-o", "json")
    asked = len(answers.asked)
    missing = top(run_cli, kubeconfig, "pod", "nosuch", "-n", "default")
    assert missing.exit_code == 1
    assert 'pods "nosuch" not found in namespace default' in missing.stderr
    assert len(answers.asked) == asked  # no agent was asked

    assert result.exit_code == 0, result.stderr
    assert [(r["kind"], r["pod"]) for r in result.json["items"]] == [
        ("gpu", None),
        ("pod", "train-b"),
    ]


def test_without_the_pods_proxy_permission_the_message_names_it(
    run_cli: Run, real: SimCluster
) -> None:
    t.gpu_node(real, "gpu-1")
    t.agent_pod(real, "gpu-1")
    real.deny("get", "pods/proxy")

    result = top(run_cli, real.kubeconfig, "-A")

    assert result.exit_code == 1
    assert "pods/proxy" in result.stderr and "Traceback" not in result.stderr
    assert "hint: ask a cluster admin to grant 'get' on 'pods/proxy' in namespace kubectl-gpu" in (
        result.stderr
    )


def test_with_no_agent_and_no_exporter_it_says_what_to_install(
    run_cli: Run, real: SimCluster
) -> None:
    t.gpu_node(real, "gpu-1")

    result = top(run_cli, real.kubeconfig, "-A")

    assert result.exit_code == 1
    assert "neither the kubectl-gpu agent nor dcgm-exporter runs in this cluster" in result.stderr
    assert "kubectl gpu install" in result.stderr


def asked_agents(answers: t.PodProxyAnswers) -> set[str]:
    """The agent pods whose figures were asked for through the pod proxy."""
    return {p.split("/proxy/")[0].rsplit("/", 1)[-1].split(":")[0] for p in answers.asked}


def test_a_pod_or_a_node_is_read_from_its_own_node_only(
    run_cli: Run, real: SimCluster, proxy: tuple[t.PodProxyAnswers, Path]
) -> None:
    answers, kubeconfig = proxy
    agents = {}
    for node, gpu in (("gpu-1", GPU_A), ("gpu-2", GPU_B), ("gpu-3", GPU_A)):
        t.gpu_node(real, node, "time-slicing")
        agents[node] = t.agent_pod(real, node)
        answers.answers[(agents[node], "/v1/usage")] = t.Answer(
            body=t.usage_doc(node, [t.h100(gpu, 1, 5)], [], [])
        )
    t.ensure_namespace(real, "ml")
    pod = t.running_pod(real, "train-b", "gpu-2", "ml")
    t.running_pod(real, "web-0", "cpu-1", "ml")  # on a node with no GPU and no agent
    answers.answers[(agents["gpu-2"], "/v1/usage")] = t.Answer(
        body=t.usage_doc(
            "gpu-2",
            [t.h100(GPU_B, 3, 10)],
            [(GPU_B, t.process(12, 2, pod["metadata"]["uid"]))],
            [t.held(f"{GPU_B}::1", GPU_B, pod, 1, 2)],
        )
    )

    one_pod = top(run_cli, kubeconfig, "pod", "train-b", "-n", "ml")
    pod_asked, answers.asked[:] = asked_agents(answers), []
    one_node = top(run_cli, kubeconfig, "node/gpu-3", "-o", "json")
    node_asked, answers.asked[:] = asked_agents(answers), []
    namespace = top(run_cli, kubeconfig, "-n", "ml")
    namespace_asked, answers.asked[:] = asked_agents(answers), []
    everything = top(run_cli, kubeconfig, "-A")

    assert one_pod.exit_code == 0, one_pod.stderr
    assert pod_asked == {agents["gpu-2"]}
    assert "GPU use from the kubectl-gpu agent on 1 node," in one_pod.stderr
    assert "ml/train-b" in one_pod.stdout and "gpu-1" not in one_pod.stdout
    assert one_node.exit_code == 0, one_node.stderr
    assert node_asked == {agents["gpu-3"]}
    assert {r["node"] for r in one_node.json["items"]} == {"gpu-3"}
    assert namespace.exit_code == 0, namespace.stderr  # cpu-1 runs no GPU: not a failure
    assert namespace_asked == {agents["gpu-2"]}
    assert everything.exit_code == 0, everything.stderr
    assert asked_agents(answers) == set(agents.values())


def test_a_pod_on_a_node_with_no_source_says_so(
    run_cli: Run, real: SimCluster, proxy: tuple[t.PodProxyAnswers, Path]
) -> None:
    answers, kubeconfig = proxy
    t.gpu_node(real, "gpu-1")
    agent = t.agent_pod(real, "gpu-1")
    answers.answers[(agent, "/v1/usage")] = t.Answer(
        body=t.usage_doc("gpu-1", [t.h100(GPU_A, 1, 5)], [], [])
    )
    t.gpu_node(real, "gpu-2")
    t.running_pod(real, "train-0", "gpu-2")

    result = top(run_cli, kubeconfig, "pod", "train-0", "-n", "default")

    assert result.exit_code == 1
    assert "node gpu-2: neither the kubectl-gpu agent nor dcgm-exporter runs on it" in (
        result.stderr
    )
    assert answers.asked == []
