"""The real kubectl binary works against the stand-in: reads, writes, patches, watches."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from typing import IO

import pytest

from tests.fakes.apiserver import FakeApiServer, cluster_policy_crd
from tests.fakes.apiserver.kubectl_cli import KubectlRunner
from tests.fakes.apiserver.samples import daemonset, node, pod

pytestmark = pytest.mark.kubectl


@pytest.fixture
def cluster(fake_apiserver: FakeApiServer) -> FakeApiServer:
    store = fake_apiserver.store
    store.create(node("gpu-1", labels={"node-role.kubernetes.io/worker": ""}))
    store.create(node("gpu-2"))
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    store.create(pod("train-a", "ml", node_name="gpu-1", gpus=1))
    store.create(pod("train-b", "ml", node_name="gpu-2", gpus=1))
    store.create(pod("web", "default", node_name="gpu-1"))
    store.create(daemonset("nvidia-device-plugin-daemonset", app="nvidia-device-plugin-daemonset"))
    return fake_apiserver


def ok(result: subprocess.CompletedProcess[str]) -> str:
    """stdout of a kubectl run that must have succeeded."""
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_get_nodes_as_json_lists_every_seeded_node(
    cluster: FakeApiServer, kubectl: KubectlRunner
) -> None:
    listed = json.loads(ok(kubectl("get", "nodes", "-o", "json")))
    assert [item["metadata"]["name"] for item in listed["items"]] == ["gpu-1", "gpu-2"]
    assert listed["items"][0]["status"]["nodeInfo"]["kubeletVersion"] == "v1.32.0"


def test_get_nodes_prints_kubectls_usual_columns(
    cluster: FakeApiServer, kubectl: KubectlRunner
) -> None:
    lines = ok(kubectl("get", "nodes")).splitlines()
    assert lines[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert lines[1].split()[:3] == ["gpu-1", "Ready", "worker"]
    assert lines[2].split()[:3] == ["gpu-2", "Ready", "<none>"]
    assert lines[1].split()[-1] == "v1.32.0"
    one = ok(kubectl("get", "node", "gpu-2", "-o", "wide")).splitlines()
    assert one[0].split()[:6] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP"]
    assert one[1].split()[:3] == ["gpu-2", "Ready", "<none>"]


def test_get_pods_in_all_namespaces_filters_by_node(
    cluster: FakeApiServer, kubectl: KubectlRunner
) -> None:
    selected = ok(
        kubectl("get", "pods", "-A", "--field-selector", "spec.nodeName=gpu-1", "-o", "json")
    )
    names = sorted(
        (p["metadata"]["namespace"], p["metadata"]["name"]) for p in json.loads(selected)["items"]
    )
    assert names == [("default", "web"), ("ml", "train-a")]
    table = ok(kubectl("get", "pods", "-A")).splitlines()
    assert table[0].split() == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert [line.split()[:4] for line in table[1:]] == [
        ["default", "web", "1/1", "Running"],
        ["ml", "train-a", "1/1", "Running"],
        ["ml", "train-b", "1/1", "Running"],
    ]


def test_label_node_adds_overwrites_and_removes(
    cluster: FakeApiServer, kubectl: KubectlRunner
) -> None:
    store = cluster.store
    assert "labeled" in ok(
        kubectl("label", "node", "gpu-1", "nvidia.com/device-plugin.config=a100")
    )
    assert (
        store.get("nodes", "gpu-1")["metadata"]["labels"]["nvidia.com/device-plugin.config"]
        == "a100"
    )
    refused = kubectl("label", "node", "gpu-1", "nvidia.com/device-plugin.config=h100")
    assert refused.returncode != 0 and "--overwrite is false" in refused.stderr
    ok(kubectl("label", "node", "gpu-1", "nvidia.com/device-plugin.config-"))
    assert (
        "nvidia.com/device-plugin.config" not in store.get("nodes", "gpu-1")["metadata"]["labels"]
    )
    assert (
        ok(kubectl("get", "nodes", "-l", "node-role.kubernetes.io/worker", "-o", "name"))
        == "node/gpu-1\n"
    )


@pytest.mark.parametrize(
    ("patch_type", "patch"),
    [
        ("merge", '{"metadata":{"annotations":{"k":"merge"}}}'),
        ("json", '[{"op":"add","path":"/metadata/annotations","value":{"k":"json"}}]'),
        ("strategic", '{"metadata":{"annotations":{"k":"strategic"}}}'),
    ],
)
def test_patch_of_each_type_changes_the_node(
    cluster: FakeApiServer, kubectl: KubectlRunner, patch_type: str, patch: str
) -> None:
    ok(kubectl("patch", "node", "gpu-2", "--type", patch_type, "-p", patch))
    assert cluster.store.get("nodes", "gpu-2")["metadata"]["annotations"] == {"k": patch_type}


def test_strategic_patch_merges_containers_by_name(
    cluster: FakeApiServer, kubectl: KubectlRunner
) -> None:
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "image": "s:1"}]}}}}
    ok(
        kubectl(
            "patch",
            "ds",
            "nvidia-device-plugin-daemonset",
            "-n",
            "kube-system",
            "-p",
            json.dumps(patch),
        )
    )
    stored = cluster.store.get("ds", "nvidia-device-plugin-daemonset", "kube-system")
    assert [c["name"] for c in stored["spec"]["template"]["spec"]["containers"]] == [
        "plugin",
        "sidecar",
    ]


def test_failed_json_patch_test_is_reported(cluster: FakeApiServer, kubectl: KubectlRunner) -> None:
    patch = '[{"op":"test","path":"/metadata/name","value":"other"}]'
    before = cluster.store.get("nodes", "gpu-1")
    result = kubectl("patch", "node", "gpu-1", "--type", "json", "-p", patch)
    assert result.returncode != 0
    # kubectl >= 1.2x prints the Status message; 1.20 (Debian's) prints its own summary.
    assert "test failed" in result.stderr or "The request is invalid" in result.stderr
    after = cluster.store.get("nodes", "gpu-1")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_create_configmap_stores_it_and_refuses_a_second(
    fake_apiserver: FakeApiServer, kubectl: KubectlRunner
) -> None:
    assert ok(
        kubectl("create", "configmap", "plugin-config", "--from-literal=a100=sharing")
    ).strip() == ("configmap/plugin-config created")
    assert fake_apiserver.store.get("cm", "plugin-config", "default")["data"] == {"a100": "sharing"}
    again = kubectl("create", "configmap", "plugin-config", "--from-literal=a=b")
    assert again.returncode != 0
    assert 'configmaps "plugin-config" already exists' in again.stderr


def test_rollout_restart_stamps_the_pod_template(
    cluster: FakeApiServer, kubectl: KubectlRunner
) -> None:
    name = "nvidia-device-plugin-daemonset"
    out = ok(kubectl("rollout", "restart", "daemonset", name, "-n", "kube-system"))
    assert out.strip() == f"daemonset.apps/{name} restarted"
    stored = cluster.store.get("daemonsets.apps", name, "kube-system")
    assert (
        "kubectl.kubernetes.io/restartedAt" in stored["spec"]["template"]["metadata"]["annotations"]
    )
    assert stored["metadata"]["generation"] == 2


def test_delete_pod_removes_it(cluster: FakeApiServer, kubectl: KubectlRunner) -> None:
    # kubectl 1.37 names the namespace; older releases (Debian's 1.32) do not
    said = ok(kubectl("delete", "pod", "train-a", "-n", "ml")).strip()
    assert said in ('pod "train-a" deleted from ml namespace', 'pod "train-a" deleted')
    assert [p["metadata"]["name"] for p in cluster.store.list("pods", "ml")] == ["train-b"]
    missing = kubectl("delete", "pod", "train-a", "-n", "ml")
    assert 'Error from server (NotFound): pods "train-a" not found' in missing.stderr


def _lines(stream: IO[str], into: queue.Queue[str]) -> None:
    for line in stream:
        into.put(line)


def test_get_watch_prints_a_new_pod(cluster: FakeApiServer, kubectl: KubectlRunner) -> None:
    watch = kubectl.popen("get", "pods", "-n", "ml", "--watch", "--request-timeout=20s")
    lines: queue.Queue[str] = queue.Queue()
    assert watch.stdout is not None and watch.stderr is not None
    reader = threading.Thread(target=_lines, args=(watch.stdout, lines), daemon=True)
    reader.start()
    try:
        seen = [lines.get(timeout=10) for _ in range(3)]  # header, train-a, train-b
        assert seen[0].split()[:2] == ["NAME", "READY"]
        cluster.store.create(pod("train-c", "ml", node_name="gpu-2", phase="Pending"))
        event = lines.get(timeout=10)
        assert event.split()[:3] == ["train-c", "0/1", "Pending"]
    finally:
        watch.kill()
        watch.wait(timeout=10)
        reader.join(timeout=10)  # the pipe reaches EOF once kubectl is gone
        watch.stdout.close()
        watch.stderr.close()


def test_custom_resource_is_served_once_its_crd_exists(
    fake_apiserver: FakeApiServer, kubectl: KubectlRunner
) -> None:
    before = kubectl("get", "clusterpolicies")
    assert (
        before.returncode != 0
        and 'the server doesn\'t have a resource type "clusterpolicies"' in before.stderr
    )
    fake_apiserver.store.create(cluster_policy_crd())
    policy = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
    }
    ok(kubectl("create", "-f", "-", stdin=json.dumps(policy)))
    assert (
        ok(kubectl("get", "clusterpolicies", "-o", "name"))
        == "clusterpolicy.nvidia.com/cluster-policy\n"
    )
    assert "clusterpolicies" in ok(kubectl("api-resources", "--api-group=nvidia.com"))


def test_forbidden_answers_read_like_rbac(cluster: FakeApiServer, kubectl: KubectlRunner) -> None:
    cluster.deny("patch", "nodes")
    result = kubectl("label", "node", "gpu-1", "a=b")
    assert result.returncode != 0
    assert (
        'Error from server (Forbidden): nodes "gpu-1" is forbidden: User "test-user" cannot patch '
        'resource "nodes" in API group "" at the cluster scope'
    ) in result.stderr
