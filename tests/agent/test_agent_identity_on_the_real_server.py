"""What the agent may do is decided by the real kube-apiserver: our RBAC, our two
ValidatingAdmissionPolicies and Pod Security, as installed by `kubectl gpu install`.

The agent acts with a token the server issued for its ServiceAccount, bound to its own
DaemonSet pod (as the kubelet mounts it), so the server itself puts the node-name claim in it.
Nothing here is judged by code of ours: every allow and deny is the real server's answer.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kit.plane.plane import ControlPlane, wait_for

pytestmark = pytest.mark.timeout(180)

KUBECTL_GPU = str(Path(sys.executable).parent / "kubectl-gpu")  # the installed entry point
NAMESPACE = "kubectl-gpu"
NODES = ("rbac-gpu-a", "rbac-gpu-b")
AGENT = f"system:serviceaccount:{NAMESPACE}:kubectl-gpu-agent"


def gpu_node(name: str) -> dict[str, Any]:
    capacity = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "2"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true"}},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


class Kubectl:
    """kubectl of the server's release, as one identity."""

    def __init__(self, binary: Path, kubeconfig: Path) -> None:
        self.binary, self.kubeconfig = binary, kubeconfig

    def __call__(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.binary), "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def ok(self, *args: str, stdin: str | None = None) -> str:
        done = self(*args, stdin=stdin)
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "-o", "json"))


@pytest.fixture(scope="module")
def installed(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Kubectl]:
    """Two GPU nodes and `kubectl gpu install` (bundle mode) on the real server."""
    admin = Kubectl(control_plane.kubectl, control_plane.kubeconfig)
    for name in NODES:
        admin.ok("create", "-f", "-", stdin=json.dumps(gpu_node(name)))
    env_kubeconfig = str(control_plane.kubeconfig)
    done = subprocess.run(
        [KUBECTL_GPU, "--kubeconfig", env_kubeconfig, "install", "--mode", "bundle"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    # the real DaemonSet controller and scheduler place both pods; KWOK runs them
    for name in NODES:
        wait_for(f"agent pod Running on {name}", lambda n=name: agent_pod(admin, n))
    try:
        yield admin
    finally:
        subprocess.run(
            [KUBECTL_GPU, "--kubeconfig", env_kubeconfig, "uninstall"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        for name in NODES:
            admin("delete", "node", name, "--wait=false")


def agent_pod(admin: Kubectl, node: str) -> str:
    pods = admin.json(
        "get", "pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/name=kubectl-gpu-agent",
        "--field-selector", f"spec.nodeName={node}",
    )["items"]  # fmt: skip
    running = [p for p in pods if p.get("status", {}).get("phase") == "Running"]
    return str(running[0]["metadata"]["name"]) if running else ""


def plugin_pod(admin: Kubectl, node: str) -> str:
    pods = admin.json(
        "get", "pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/name=kubectl-gpu-device-plugin",
        "--field-selector", f"spec.nodeName={node}",
    )["items"]  # fmt: skip
    return str(pods[0]["metadata"]["name"]) if pods else ""


@pytest.fixture(scope="module")
def agent_a(
    control_plane: ControlPlane, installed: Kubectl, tmp_path_factory: pytest.TempPathFactory
) -> Kubectl:
    """The agent on rbac-gpu-a, with a token bound to its pod (what the kubelet mounts)."""
    pod = agent_pod(installed, NODES[0])
    token = control_plane.token("kubectl-gpu-agent", NAMESPACE, bound_kind="Pod", bound_name=pod)
    path = tmp_path_factory.mktemp("agent-a") / "kubeconfig"
    agent = Kubectl(control_plane.kubectl, control_plane.kubeconfig_for(path, token, NAMESPACE))
    # A new ValidatingAdmissionPolicy is enforced once the server has loaded and compiled it,
    # a moment after it is created (seen under load): wait until a cordon (a server-side dry
    # run, nothing changes) is refused by it, or fail saying the policy never took effect.
    cordon = ("patch", "node", NODES[0], "--type", "merge", "--dry-run=server",
              "-p", json.dumps({"spec": {"unschedulable": True}}))  # fmt: skip
    wait_for(
        "the agent's admission policy to be in force",
        lambda: "kubectl-gpu-agent-own-node" in agent(*cordon).stderr,
        timeout=30,
    )
    return agent


def patch_node(who: Kubectl, node: str, patch: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return who("patch", "node", node, "--type", "merge", "-p", json.dumps(patch))


def test_the_server_names_the_agent_and_its_node(agent_a: Kubectl) -> None:
    review = agent_a.json("auth", "whoami")
    info = review["status"]["userInfo"]
    assert info["username"] == AGENT
    assert info["extra"]["authentication.kubernetes.io/node-name"] == [NODES[0]]


def test_the_agent_writes_its_state_on_its_own_node(agent_a: Kubectl, installed: Kubectl) -> None:
    done = patch_node(
        agent_a,
        NODES[0],
        {"metadata": {"labels": {"kubectl-gpu.io/mig.state": "success"},
                      "annotations": {"kubectl-gpu.io/mig.reason": "applied"}}},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    labels = installed.json("get", "node", NODES[0])["metadata"]["labels"]
    assert labels["kubectl-gpu.io/mig.state"] == "success"


@pytest.mark.parametrize(
    ("what", "patch", "denied_by"),
    [
        ("cordon", {"spec": {"unschedulable": True}}, "may not change a Node's spec"),
        (
            "taint",
            {"spec": {"taints": [{"key": "x", "value": "y", "effect": "NoSchedule"}]}},
            "may not change a Node's spec",
        ),
        (
            "a foreign label",
            {"metadata": {"labels": {"node-role.kubernetes.io/gpu": ""}}},
            "may set or remove only labels prefixed kubectl-gpu.io/",
        ),
        (
            "a foreign annotation",
            {"metadata": {"annotations": {"example.com/x": "1"}}},
            "may set or remove only annotations prefixed kubectl-gpu.io/",
        ),
    ],
)
def test_the_agent_is_denied_beyond_its_keys_on_its_own_node(
    agent_a: Kubectl, what: str, patch: dict[str, Any], denied_by: str
) -> None:
    done = patch_node(agent_a, NODES[0], patch)
    assert done.returncode != 0, f"{what} was allowed"
    assert "kubectl-gpu-agent-own-node" in done.stderr
    assert denied_by in done.stderr


def test_the_agent_may_not_change_another_node(agent_a: Kubectl) -> None:
    done = patch_node(
        agent_a, NODES[1], {"metadata": {"labels": {"kubectl-gpu.io/mig.state": "x"}}}
    )
    assert done.returncode != 0
    assert "may change only the Node it runs on" in done.stderr


def test_the_agent_restarts_only_the_plugin_on_its_own_node(
    agent_a: Kubectl, installed: Kubectl
) -> None:
    other = wait_for("plugin pod on the other node", lambda: plugin_pod(installed, NODES[1]))
    done = agent_a("delete", "pod", "-n", NAMESPACE, other, "--wait=false")
    assert done.returncode != 0
    assert "kubectl-gpu-agent-plugin-pods" in done.stderr
    own = wait_for("plugin pod on its node", lambda: plugin_pod(installed, NODES[0]))
    done = agent_a("delete", "pod", "-n", NAMESPACE, own, "--wait=false")
    assert done.returncode == 0, done.stderr


def test_the_agent_may_not_delete_other_pods_in_the_plugin_namespace(
    agent_a: Kubectl, installed: Kubectl
) -> None:
    # its own pod, on its own node, but not a device plugin pod
    own = agent_pod(installed, NODES[0])
    done = agent_a("delete", "pod", "-n", NAMESPACE, own, "--wait=false")
    assert done.returncode != 0
    assert "kubectl-gpu-agent-plugin-pods" in done.stderr


def report(node: str) -> str:
    """The smallest GPUNodeReport the CRD's schema accepts (a node without GPUs)."""
    status = {
        "agentVersion": "test", "generatedAt": "2026-01-01T00:00:00Z",
        "digest": "sha256:" + "0" * 64,
        "gpuCount": 0, "allocationCount": 0, "gpus": [], "allocations": [],
        "registered": None, "allocatable": None, "findings": [],
    }  # fmt: skip
    return json.dumps(
        {"apiVersion": "kubectl-gpu.io/v1", "kind": "GPUNodeReport",
         "metadata": {"name": node}, "spec": {"node": node}, "status": status}
    )  # fmt: skip


def test_the_agent_publishes_only_its_own_report(agent_a: Kubectl) -> None:
    done = agent_a("create", "-f", "-", stdin=report(NODES[1]))
    assert done.returncode != 0
    assert "may change only the Node it runs on" in done.stderr
    own = agent_a("create", "-f", "-", stdin=report(NODES[0]))
    assert own.returncode == 0, own.stderr


def test_without_the_patch_verb_the_agent_cannot_report_its_state(
    agent_a: Kubectl, installed: Kubectl
) -> None:
    """The RBAC installed is what lets the agent work: take one verb away and the server says no."""
    role = installed.json("get", "clusterrole", "kubectl-gpu-agent")
    original = json.loads(json.dumps(role))
    for rule in role["rules"]:
        if rule.get("resources") == ["nodes"]:
            rule["verbs"] = [v for v in rule["verbs"] if v != "patch"]
    installed.ok("replace", "-f", "-", stdin=json.dumps(role))
    try:
        done = wait_for(
            "RBAC to take the verb away",
            lambda: (
                r
                if (
                    r := patch_node(
                        agent_a,
                        NODES[0],
                        {"metadata": {"labels": {"kubectl-gpu.io/mig.state": "failed"}}},
                    )
                ).returncode
                != 0
                else None
            ),
            timeout=20,
        )
        assert 'cannot patch resource "nodes"' in done.stderr
    finally:
        original["metadata"].pop("resourceVersion", None)
        installed.ok("apply", "-f", "-", stdin=json.dumps(original))


def test_pod_security_admits_the_agent_only_in_a_privileged_namespace(installed: Kubectl) -> None:
    daemonset = installed.json("get", "daemonset", "-n", NAMESPACE, "kubectl-gpu-agent")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "agent-copy"},
        "spec": daemonset["spec"]["template"]["spec"],
    }
    labels = installed.json("get", "namespace", NAMESPACE)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    installed.ok("create", "namespace", "rbac-restricted")
    try:
        installed.ok(
            "label", "namespace", "rbac-restricted", "pod-security.kubernetes.io/enforce=restricted"
        )
        pod["spec"]["serviceAccountName"] = "default"
        refused = installed(
            "create", "--dry-run=server", "-n", "rbac-restricted", "-f", "-", stdin=json.dumps(pod)
        )
        assert refused.returncode != 0
        assert 'violates PodSecurity "restricted:latest"' in refused.stderr
        assert "privileged" in refused.stderr
        pod["spec"]["serviceAccountName"] = "kubectl-gpu-agent"
        admitted = installed(
            "create", "--dry-run=server", "-n", NAMESPACE, "-f", "-", stdin=json.dumps(pod)
        )
        assert admitted.returncode == 0, admitted.stderr
    finally:
        installed("delete", "namespace", "rbac-restricted", "--wait=false")
