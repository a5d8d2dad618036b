"""A GPU node reserved with a foreign taint (`dedicated=ml:NoSchedule`) whose device plugin
DaemonSet tolerates only `nvidia.com/gpu`: the DaemonSet controller would not recreate a plugin
pod a change deletes, so `share`, `share off --drain`, `share rollback`, `mig apply` and `mig
recover` refuse before their first write, cordon or delete, naming the taint and the toleration
to add (their dry runs give the same verdict and exit code); the toleration the hint gives
makes the same command work; `doctor` names the taint as why a plugin pod is missing. Through
the real kubectl on the real control plane."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from kubectl_gpu import keys
from tests.agent.fixtures import agent_pod
from tests.cli.test_mig_recover_brings_back_a_stuck_node import stuck_labels
from tests.journey.fixtures import Kubectl
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import layouts

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(180)]
PLAIN = "version: v1\nflags:\n  migStrategy: none\n"
CONFIGMAP = ("configmap", "-n", "nvidia-device-plugin", "nvdp-nvidia-device-plugin-configs")
TAINT = "dedicated=ml:NoSchedule"
TOLERATION = "{key: dedicated, operator: Equal, value: ml, effect: NoSchedule}"
Run = subprocess.CompletedProcess[str]
PATCH = re.compile(r"kubectl -n \S+ patch daemonset \S+ --type=json -p '[^']*'")


def plugin_uid(cluster: SimCluster, node: str) -> str:
    pod = cluster.plugin_pod(node)
    assert pod is not None, f"no plugin pod on {node}"
    return str(pod["metadata"]["uid"])


def refused_alike(runs: list[Run], real: Run) -> None:
    """Every run exits 1 as the real one does, naming the taint, the toleration to add and
    the command that removes the taint instead."""
    for run in [*runs, real]:
        assert run.returncode == 1, (run.args, run.stdout, run.stderr)
        said = run.stdout + run.stderr
        assert "does not tolerate taint dedicated=ml:NoSchedule of node gpu-a" in said, said
        assert TOLERATION in said
        assert "kubectl taint node gpu-a dedicated:NoSchedule-" in said
        assert "Traceback" not in said


def test_share_off_and_rollback_refuse_then_the_hinted_toleration_lets_them_through(
    sim_cluster: MakeSimCluster, kubectl: Callable[[SimCluster], Kubectl]
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 2)], "helm", {"any": PLAIN}, "any")
    k = kubectl(cluster)
    shared = k("gpu", "share", "--replicas", "2", "--node", "gpu-a", "--wait", "--timeout", "30s")
    assert shared.returncode == 0, shared.stderr
    assert cluster.allocatable("gpu-a") == 4
    assert k("taint", "node", "gpu-a", TAINT).returncode == 0
    before, text = plugin_uid(cluster, "gpu-a"), k("get", *CONFIGMAP, "-o", "json").stdout
    configmap = json.loads(text)

    share = ("gpu", "share", "--replicas", "4", "--node", "gpu-a")
    refused_alike([k(*share, "--dry-run"), k(*share, "--dry-run=server")], k(*share))
    off = ("gpu", "share", "off", "--node", "gpu-a", "--drain")
    refused_alike([k(*off, "--dry-run"), k(*off, "--dry-run=server")], k(*off))
    rollback = k("gpu", "share", "rollback")
    refused_alike([k("gpu", "share", "rollback", "--dry-run")], rollback)

    assert plugin_uid(cluster, "gpu-a") == before  # never deleted
    node = cluster.client.get("nodes", "gpu-a")
    assert not node["spec"].get("unschedulable")  # never cordoned
    assert json.loads(k("get", *CONFIGMAP, "-o", "json").stdout)["data"] == configmap["data"]
    assert cluster.allocatable("gpu-a") == 4

    # the hint's own command adds the toleration; then the same rollback goes through
    commands = PATCH.findall(rollback.stderr)
    assert any("nvdp-nvidia-device-plugin " in c for c in commands), rollback.stderr
    for command in commands:  # the plugin's, and GFD's beside it
        patched = k(*shlex.split(command)[1:])
        assert patched.returncode == 0, patched.stderr
    cluster.settle()
    done = k("gpu", "share", "rollback", "--wait", "--timeout", "60s")
    assert done.returncode == 0, done.stderr
    assert cluster.allocatable("gpu-a") == 2


def test_doctor_names_the_taint_that_keeps_the_plugin_away(
    sim_cluster: MakeSimCluster, kubectl: Callable[[SimCluster], Kubectl]
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1)], "helm", {"any": PLAIN}, "any")
    k = kubectl(cluster)
    assert k("taint", "node", "gpu-a", TAINT).returncode == 0
    pod = cluster.plugin_pod("gpu-a")
    assert pod is not None
    # what a change used to do: delete the plugin pod, which the DaemonSet does not recreate
    deleted = k("delete", "pod", "-n", pod["metadata"]["namespace"], pod["metadata"]["name"])
    assert deleted.returncode == 0, deleted.stderr
    cluster.settle()
    assert cluster.plugin_pod("gpu-a") is None

    found = k("gpu", "doctor", "-o", "json")

    assert found.returncode == 1, found.stderr
    [finding] = [
        d for d in json.loads(found.stdout)["diagnoses"] if d["object"] == "node/gpu-a"
        and "no device plugin pod runs on node gpu-a" in d["message"]
    ]  # fmt: skip
    assert "does not tolerate taint dedicated=ml:NoSchedule of node gpu-a" in finding["message"]
    assert TOLERATION in finding["fix"]


def mig_file(tmp_path: Path) -> str:
    path = tmp_path / "mig.yaml"
    configs = {"all-3g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]}
    path.write_text(yaml.safe_dump({"version": "v1", "mig-configs": configs}))
    return str(path)


def test_mig_apply_refuses_where_the_paused_plugin_would_not_come_back(
    sim_cluster: MakeSimCluster, kubectl: Callable[[SimCluster], Kubectl], tmp_path: Path
) -> None:
    cluster = sim_cluster(["gpu-a=A100-SXM4-80GB:1"], layouts.helm(env={"MIG_STRATEGY": "mixed"}))
    agent_pod(cluster, "gpu-a")
    k = kubectl(cluster)
    assert k("taint", "node", "gpu-a", TAINT).returncode == 0
    apply = ("gpu", "mig", "apply", "-f", mig_file(tmp_path), "-c", "all-3g", "--node", "gpu-a")

    refused_alike(
        [k(*apply, "--dry-run"), k(*apply, "--dry-run=server")],
        k(*apply, "--wait", "--timeout", "60s"),
    )

    labels = cluster.client.get("nodes", "gpu-a")["metadata"].get("labels") or {}
    assert keys.MIG_DESIRED_LABEL not in labels
    assert not any(g.mig_enabled for g in cluster.node_gpus("gpu-a"))
    assert cluster.plugin_pod("gpu-a") is not None


def test_mig_recover_refuses_to_bring_back_a_plugin_its_daemonset_would_not_run(
    sim_cluster: MakeSimCluster, kubectl: Callable[[SimCluster], Kubectl]
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "A100-SXM4-80GB", 1, gpu_taint=True)], "gpu-operator")
    cluster.client.patch("nodes", "gpu-a", stuck_labels(keys.MIG_CONFIG_STATE_LABEL))
    cluster.settle()
    k = kubectl(cluster)
    assert k("taint", "node", "gpu-a", TAINT).returncode == 0

    refused = k("gpu", "mig", "recover", "gpu-a")

    assert refused.returncode == 1, refused.stderr
    assert "does not tolerate taint dedicated=ml:NoSchedule of node gpu-a" in refused.stderr
    assert "ClusterPolicy's spec.daemonsets.tolerations" in refused.stderr
    assert "nothing was written" in refused.stderr
    labels = cluster.client.get("nodes", "gpu-a")["metadata"]["labels"]
    assert labels[keys.DEPLOY_DEVICE_PLUGIN_LABEL] == keys.PAUSED_FOR_MIG_CHANGE  # untouched
    assert labels[keys.MIG_CONFIG_STATE_LABEL] == "pending"
