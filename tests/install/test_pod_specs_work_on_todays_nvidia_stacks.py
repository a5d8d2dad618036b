"""Our pods on today's NVIDIA stacks: the NVIDIA runtime class (GPU Operator >= 25.10 makes CDI
the default, so `nvidia` is no longer every node's default runtime), a privileged agent as
NVIDIA's MIG manager is, a namespace the Pod Security admission lets them into, node affinity
for NFD, GFD or only `nvidia.com/gpu.present`, a startup probe for a long first pass, and the
image flags."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kubectl_gpu import bundle
from tests.conftest import ROOT, CliResult
from tests.kit.cluster import NodeSpec
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube.client import KubeClient
from tests.kit.node.matching import selector_matches

Run = Callable[..., CliResult]
pytestmark = pytest.mark.timeout(120)  # clusters on the real control plane
Obj = dict[str, Any]
NFD = "feature.node.kubernetes.io/pci-10de.present"
PRESENT = "nvidia.com/gpu.present"


def rendered(run_cli: Run, *flags: str) -> list[Obj]:
    result = run_cli("install", "--dry-run=client", "-o", "yaml", *flags)
    assert result.exit_code == 0, result.stderr
    import yaml

    items: list[Obj] = yaml.safe_load(result.stdout)["items"]
    return items


def pod_of(objects: list[Obj], name: str) -> Obj:
    ds = next(o for o in objects if o["kind"] == "DaemonSet" and o["metadata"]["name"] == name)
    spec: Obj = ds["spec"]["template"]["spec"]
    return spec


def runtime_class(client: KubeClient, name: str = "nvidia", handler: str = "nvidia") -> None:
    client.create({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                   "metadata": {"name": name}, "handler": handler})  # fmt: skip


def test_dry_run_shows_runtime_class_privileged_agent_psa_label_probe_and_image(
    run_cli: Run,
) -> None:
    image = "registry.example/gpu/agent:v9"
    flags = ("--runtime-class", "nvidia", "--image", image, "--image-pull-policy", "Always")
    objects = rendered(run_cli, *flags)

    namespace = objects[0]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    for name in (bundle.AGENT, bundle.DEVICE_PLUGIN):
        assert pod_of(objects, name)["runtimeClassName"] == "nvidia"
    [agent] = pod_of(objects, bundle.AGENT)["containers"]
    assert agent["image"] == image
    assert agent["imagePullPolicy"] == "Always"
    assert agent["securityContext"]["privileged"] is True
    assert agent["startupProbe"]["exec"]["command"][:2] == ["kubectl-gpu-agent", "--check-health"]


def test_without_a_cluster_or_flag_no_runtime_class_is_assumed(run_cli: Run) -> None:
    objects = rendered(run_cli)
    assert "runtimeClassName" not in pod_of(objects, bundle.AGENT)
    [agent] = pod_of(objects, bundle.AGENT)["containers"]
    assert agent["image"] == f"{bundle.AGENT_IMAGE}:v{bundle.__version__}"
    assert agent["imagePullPolicy"] == "IfNotPresent"


def test_the_manifest_says_why_the_agent_is_privileged() -> None:
    text = (ROOT / "kubectl_gpu" / "manifests" / "bundle-60-agent.yaml").read_text()
    reason = text[text.index("securityContext:") : text.index("privileged: true")]
    assert "MIG manager" in reason and "1.18" in reason and "NVIDIA_MIG_CONFIG_DEVICES" in reason
    rbac_doc = (ROOT / "docs" / "rbac.md").read_text()
    assert "privileged" in rbac_doc and "mig-manager" in rbac_doc


def test_the_first_pass_may_take_as_long_as_liveness_allows_before_it_counts() -> None:
    [agent] = pod_of(bundle.render(bundle.Options()), bundle.AGENT)["containers"]
    startup, liveness = agent["startupProbe"], agent["livenessProbe"]
    allowed = startup["periodSeconds"] * startup["failureThreshold"]
    assert allowed >= 1800  # the slowest MIG change: several waits of --timeout 300 s
    assert "initialDelaySeconds" not in liveness  # the startup probe holds liveness back


@pytest.mark.parametrize(
    "labels",
    [
        {NFD: "true"},
        {"feature.node.kubernetes.io/cpu-model.vendor_id": "NVIDIA"},
        {"nvidia.com/gpu.count": "8", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        {PRESENT: "true"},
    ],
    ids=["nfd-pci", "nfd-grace", "gfd-only", "gpu-present-only"],
)
def test_our_pods_are_placed_on_a_gpu_node_however_it_is_labelled(labels: dict[str, str]) -> None:
    node = {"metadata": {"name": "n", "labels": labels}}
    for name in (bundle.AGENT, bundle.DEVICE_PLUGIN):
        assert selector_matches(node, pod_of(bundle.render(bundle.Options()), name))
    assert bundle.is_gpu_node(node)
    assert not selector_matches({"metadata": {"name": "cpu", "labels": {}}},
                                pod_of(bundle.render(bundle.Options()), bundle.AGENT))  # fmt: skip


def test_the_bundle_plugin_leaves_a_node_paused_for_a_mig_change() -> None:
    paused = {"metadata": {"name": "n", "labels": {PRESENT: "true",
              "nvidia.com/gpu.deploy.device-plugin": "paused-for-mig-change"}}}  # fmt: skip
    objects = bundle.render(bundle.Options())
    assert not selector_matches(paused, pod_of(objects, bundle.DEVICE_PLUGIN))
    assert selector_matches(paused, pod_of(objects, bundle.AGENT))  # the agent stays


def test_install_uses_the_nvidia_runtime_class_it_finds(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1)])
    runtime_class(cluster.client, "nvidia-cdi", handler="nvidia")
    runtime_class(cluster.client, "kata", handler="kata")

    result = run_cli("--kubeconfig", str(cluster.kubeconfig), "install")

    assert result.exit_code == 0, result.stderr
    assert "runtime class: nvidia-cdi" in result.stderr
    for name in (bundle.AGENT, bundle.DEVICE_PLUGIN):
        ds = cluster.client.get("daemonsets", name, "kubectl-gpu")
        assert ds["spec"]["template"]["spec"]["runtimeClassName"] == "nvidia-cdi"


def test_without_a_nvidia_runtime_class_none_is_set_and_the_user_is_told(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1)])
    result = run_cli("--kubeconfig", str(cluster.kubeconfig), "install")
    assert result.exit_code == 0, result.stderr
    assert "assuming nvidia is the nodes' default runtime" in result.stderr
    ds = cluster.client.get("daemonsets", bundle.AGENT, "kubectl-gpu")
    assert "runtimeClassName" not in ds["spec"]["template"]["spec"]


def test_a_runtime_class_that_does_not_exist_stops_the_install_before_any_write(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1)])
    runtime_class(cluster.client, "nvidia")
    before = cluster.client.list("namespaces")
    roles = cluster.client.list("clusterroles")  # a real server has its bootstrap roles

    result = run_cli("--kubeconfig", str(cluster.kubeconfig), "install",
                     "--runtime-class", "nvidia-legacy")  # fmt: skip

    assert result.exit_code == 1
    assert "RuntimeClass nvidia-legacy does not exist (the cluster has: nvidia)" in result.stderr
    assert "nothing was written" in result.stderr
    assert cluster.client.list("namespaces") == before
    assert cluster.client.list("clusterroles") == roles


def test_status_names_gpu_nodes_our_daemonsets_do_not_select(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1), NodeSpec("gpu-b", "L4", 1)])
    base = ("--kubeconfig", str(cluster.kubeconfig))
    assert run_cli(*base, "install").exit_code == 0
    cluster.settle(10)
    # Someone relabels gpu-b by hand; its GPUs are still advertised.
    cluster.client.patch("nodes", "gpu-b", {"metadata": {"labels": {NFD: None, PRESENT: None}}})
    cluster.client.patch(
        "nodes", "gpu-b", {"status": {"capacity": {"nvidia.com/gpu": "1"}}}, status=True
    )

    status = run_cli(*base, "status", "-o", "json")

    assert status.exit_code == 1
    assert status.json["gpuNodesNotSelected"] == ["gpu-b"]
    assert "GPU nodes our DaemonSets do not select: gpu-b" in status.stderr


def test_status_says_when_the_node_affinity_matches_no_node(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster([NodeSpec("cpu-1")])
    base = ("--kubeconfig", str(cluster.kubeconfig))
    install = run_cli(*base, "install")
    assert install.exit_code == 0, install.stderr
    assert "no node carries a GPU label" in install.stderr

    status = run_cli(*base, "status")

    assert status.exit_code == 1
    assert "our DaemonSets' node affinity matches no node" in status.stderr
