"""Every broken cluster the simulation can produce: `doctor POD` and cluster `doctor` name the
right layer and cause, and no finding that is not true of that cluster.

Each scenario builds one cluster, breaks one thing, and lists what each view must say (layer
and a part of the finding) and what else it may say. Any other error or warning is a false
finding and fails the scenario.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest

from kubectl_gpu import keys
from tests.cli.doctorpods import gpu_pod, run_pods
from tests.conftest import ROOT, CliResult, eventually
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

Run = Callable[..., CliResult]
pytestmark = pytest.mark.timeout(120)  # clusters on the real control plane
SCHEMA = json.loads((ROOT / "schemas" / "doctor-result.v1.json").read_text())
GOOD = "version: v1\n"
BAD_FLAG = "version: v1\nflags:\n  plugin:\n    deviceIDStrategy: serial\n"
TOO_OLD = "CUDA error: CUDA driver version is insufficient for CUDA runtime version"
MAX_FIX = 200  # characters: the FIX column stays readable; details go to the evidence
Finding = tuple[str, str]  # (layer, part of the message)


@dataclasses.dataclass(frozen=True)
class Scenario:
    build: Callable[[MakeSimCluster], SimCluster]
    pod: Finding  # what `doctor POD` must find (as an error)
    cluster: Finding | None  # what cluster `doctor` must find (None: it must find no error)
    also: tuple[str, ...] = ()  # other findings that are true of this cluster


def helm(make: MakeSimCluster, config: str = GOOD, *, model: str = "L4", count: int = 1) -> Any:
    node = NodeSpec("gpu-a", model, count, gpu_taint=True)
    return make([node], "helm", {"any": config}, "any")


def with_pod(cluster: SimCluster, **kwargs: Any) -> SimCluster:
    run_pods(cluster, gpu_pod("train", tolerate=kwargs.pop("tolerate", True), **kwargs))
    return cluster


def crash_loop(make: MakeSimCluster) -> SimCluster:
    """A good config turned bad: the restarted plugin crash-loops and allocatable falls to 0."""
    cluster = helm(make, count=2)
    run_pods(cluster, gpu_pod("before", tolerate=True))  # one GPU in use before the change
    configs = "nvdp-nvidia-device-plugin-configs"
    body = {"data": {"any": BAD_FLAG}}
    cluster.client.patch("configmaps", configs, body, namespace="nvidia-device-plugin")
    cluster.restart_plugin("gpu-a")

    def crash_looping() -> bool:  # NVIDIA's process starts, refuses the config and exits
        pod = cluster.plugin_pod("gpu-a") or {}
        states = (pod.get("status") or {}).get("containerStatuses") or []
        return any((c.get("state") or {}).get("waiting", {}).get("reason") == "CrashLoopBackOff"
                   for c in states)  # fmt: skip

    assert eventually(crash_looping, timeout=60), "the plugin never crash-looped"
    return with_pod(cluster)


def missing_key(make: MakeSimCluster) -> SimCluster:
    """A node labelled with a key the ConfigMap lacks: config-manager fails, nothing starts
    (the node side starts the plugin's pod: KWOK would show it Running at once)."""
    node = NodeSpec(
        "gpu-a", "L4", 1, gpu_taint=True, labels={"nvidia.com/device-plugin.config": "typo"}
    )
    cluster = make([node], "helm", {"any": GOOD}, "any", node_starts_programs=True)
    plugin = cluster.plugin_pod("gpu-a")
    assert plugin is not None and plugin["status"]["phase"] == "Pending"  # as on a kubelet
    return with_pod(cluster)


def mig_off(make: MakeSimCluster) -> SimCluster:
    cluster = make([NodeSpec("gpu-a", "A100-SXM4-80GB", 1, gpu_taint=True)], "gpu-operator")
    return with_pod(cluster, resource="nvidia.com/mig-1g.10gb")


def wrong_strategy(make: MakeSimCluster) -> SimCluster:
    node = NodeSpec("gpu-a", "A100-SXM4-80GB", 1, gpu_taint=True, mig={0: ["1g.10gb"] * 7})
    cluster = make([node], "gpu-operator")
    return with_pod(cluster, resource="nvidia.com/mig-1g.10gb")


def stuck_mig(make: MakeSimCluster) -> SimCluster:
    """An aborted MIG manager left the change pending and the plugin paused (since-when as
    the agent recorded it, long ago)."""
    cluster = make([NodeSpec("gpu-a", "A100-SXM4-80GB", 1, gpu_taint=True)], "gpu-operator")
    labels = {
        keys.MIG_CONFIG_LABEL: "all-1g.10gb",
        keys.MIG_CONFIG_STATE_LABEL: "pending",
        keys.DEPLOY_DEVICE_PLUGIN_LABEL: keys.PAUSED_FOR_MIG_CHANGE,
    }
    notes = {keys.MIG_PENDING_SINCE_ANNOTATION: "2026-01-01T00:00:00Z"}
    cluster.client.patch("nodes", "gpu-a", {"metadata": {"labels": labels, "annotations": notes}})
    cluster.settle()  # the plugin pod leaves, allocatable falls to 0
    return with_pod(cluster)


def taint(make: MakeSimCluster) -> SimCluster:
    return with_pod(helm(make), tolerate=False)


def product(make: MakeSimCluster) -> SimCluster:
    return with_pod(helm(make), selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})


def quota(make: MakeSimCluster) -> SimCluster:
    cluster = helm(make)
    hard = {"requests.nvidia.com/gpu": "0"}
    cluster.client.create(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "gpus", "namespace": "default"},
            "spec": {"hard": hard},
            "status": {"hard": hard, "used": {"requests.nvidia.com/gpu": "0"}},
        }
    )
    refused = (
        'Error creating: pods "train" is forbidden: exceeded quota: gpus, requested: '
        "requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=0, limited: "
        "requests.nvidia.com/gpu=0"
    )
    cluster.client.create(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "train.1", "namespace": "default"},
            "involvedObject": {"kind": "Job", "namespace": "default", "name": "train"},
            "reason": "FailedCreate",
            "message": refused,
            "type": "Warning",
            "source": {"component": "job-controller"},
            "count": 1,
        }
    )
    return cluster


def driver_logs(make: MakeSimCluster) -> SimCluster:
    cluster = with_pod(helm(make))
    cluster.keep_log("default", "train", "cuda", f"import torch\n{TOO_OLD}\n")
    return cluster


def unhealthy(make: MakeSimCluster) -> SimCluster:
    """What kubelet publishes after the plugin marked one of eight GPUs unhealthy (the
    simulated plugin has no health checks, so none runs to publish anything else)."""
    node = NodeSpec("gpu-a", "H100-SXM5-80GB", 8, gpu_taint=True)
    cluster = make([node], "helm", controllers=("kubelet",))
    status = {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "7"}}
    cluster.client.patch("nodes", "gpu-a", {"status": status}, status=True)
    return with_pod(cluster, amount="8")


SCENARIOS = {
    "plugin crash-loop": Scenario(
        crash_loop,
        ("kubelet", "device plugin on node gpu-a is CrashLoopBackOff: key any is not a valid"),
        ("kubelet", "device plugin on node gpu-a is CrashLoopBackOff: key any is not a valid"),
        ("advertises no GPUs",),
    ),
    "missing config key": Scenario(
        missing_key,
        ("kubelet", 'config-manager fails with "specified config typo does not exist"'),
        ("kubelet", 'config-manager fails with "specified config typo does not exist"'),
        ("advertises no GPUs",),
    ),
    "MIG off": Scenario(mig_off, ("scheduler", "MIG is disabled on gpu-a"), None),
    "wrong MIG strategy": Scenario(
        wrong_strategy, ("scheduler", "MIG strategy single on gpu-a advertises"), None
    ),
    "stuck MIG": Scenario(
        stuck_mig,
        ("kubelet", "device plugin on node gpu-a is missing (a stuck MIG change paused it"),
        ("driver", "the MIG change on node gpu-a is stuck: nvidia.com/mig.config.state=pending"),
        ("advertises no GPUs",),
    ),
    "taint": Scenario(taint, ("scheduler", "untolerated taint nvidia.com/gpu=present"), None),
    "product selector": Scenario(
        product, ("scheduler", "no node with free GPUs matches the pod's node selector"), None
    ),
    "quota": Scenario(quota, ("admission", "a ResourceQuota is exceeded"), None),
    "driver errors in logs": Scenario(
        driver_logs,
        ("driver", "needs a newer NVIDIA driver than node gpu-a has"),
        None,
    ),
    "unhealthy GPU": Scenario(
        unhealthy,
        ("scheduler", "no node has 8 nvidia.com/gpu at all (the largest has 7)"),
        ("driver", "1 of 8 nvidia.com/gpu on node gpu-a are unhealthy"),
    ),
}


def doctor(run_cli: Run, cluster: SimCluster, *args: str) -> dict[str, Any]:
    result = run_cli("--kubeconfig", str(cluster.kubeconfig), "doctor", *args, "-o", "json")
    assert result.exception is None and result.exit_code in (0, 1), result.stderr
    jsonschema.validate(result.json, SCHEMA)
    assert result.exit_code == (0 if result.json["healthy"] else 1)
    return dict(result.json)


def problems(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for d in document["diagnoses"] if d["severity"] in ("error", "warning")]


def assert_nothing_false(found: list[dict[str, Any]], true: list[str]) -> None:
    false = [d for d in found if not any(t in d["message"] for t in true)]
    assert false == [], "false findings"
    assert all(len(d["fix"]) <= MAX_FIX for d in found), [d["fix"] for d in found]


@pytest.mark.parametrize("name", SCENARIOS)
def test_doctor_names_the_cause_and_nothing_false(
    name: str, run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    scenario = SCENARIOS[name]
    cluster = scenario.build(sim_cluster)
    true = [scenario.pod[1], *(scenario.cluster or ("",))[1:], *scenario.also]

    pod = problems(doctor(run_cli, cluster, "train"))
    layer, cause = scenario.pod
    assert any(d["layer"] == layer and cause in d["message"] for d in pod), pod
    assert_nothing_false(pod, true)

    whole = problems(doctor(run_cli, cluster))
    if scenario.cluster is None:
        assert [d for d in whole if d["severity"] == "error"] == []
    else:
        layer, cause = scenario.cluster
        assert any(d["layer"] == layer and cause in d["message"] for d in whole), whole
    assert_nothing_false(whole, true)
