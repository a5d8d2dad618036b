"""Each simulated GPU node has a network namespace the real API server's pod proxy reaches, and
nothing simulated leaves the machine.

kube-apiserver refuses to proxy to loopback, so `kubectl gpu top` on a simulated cluster needs
pods with real addresses: here the GPU Operator's dcgm-exporter pod serves `/metrics` from inside
its node's namespace, and `kubectl get --raw …/pods/NAME:9400/proxy/metrics` — the request a user
without our agent makes — reaches it through kube-apiserver. A simulated address that is in no
namespace fails on this machine (`unreachable`) instead of following the default route out
through eth0, and when the cluster stops its namespaces, veths, routes and relays are gone.
"""

from __future__ import annotations

import ipaddress
import subprocess
import threading
from pathlib import Path

import pytest

from tests.kit.cluster import NodeSpec
from tests.kit.cluster.fixture import MakeSimCluster, kubectl_for
from tests.kit.plane import netns

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.timeout(120),
    pytest.mark.skipif(netns.unavailable() is not None, reason=str(netns.unavailable())),
]


def ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=False)


def test_pod_proxy_reaches_a_server_in_a_node_namespace_and_all_is_removed_at_stop(
    sim_cluster: MakeSimCluster, tmp_path: Path
) -> None:
    cluster = sim_cluster(
        [NodeSpec("gpu-a", "L4", 1), NodeSpec("gpu-b", "L4", 1), NodeSpec("cpu-1")],
        node_networks=True,
        dcgm_exporter="copied",
    )
    kubectl = kubectl_for(cluster, tmp_path)
    pods = cluster.store.list("pods", "gpu-operator", label_selector="app=nvidia-dcgm-exporter")
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["gpu-a", "gpu-b"]
    for pod in pods:
        node, name = pod["spec"]["nodeName"], pod["metadata"]["name"]
        pod_ip = pod["status"]["podIP"]
        network = cluster.networks[node]
        assert pod_ip in network.addresses
        # from the node's own pod network, which no other cluster on the machine uses
        assert ipaddress.IPv4Address(pod_ip) in network.pod_network
        path = f"/api/v1/namespaces/gpu-operator/pods/{name}:9400/proxy/metrics"
        got = kubectl("get", "--raw", path)
        assert got.returncode == 0, got.stderr
        uuid = cluster.node_gpus(node)[0].uuid
        assert f'UUID="{uuid}"' in got.stdout and f'Hostname="{node}"' in got.stdout
        # the host sends it, and what goes to the node's InternalIP, through the node's veth
        assert f"dev {network.host_if}" in ip("route", "get", pod_ip).stdout
        addresses = cluster.store.get("nodes", node)["status"]["addresses"]
        internal = next(a["address"] for a in addresses if a["type"] == "InternalIP")
        assert internal == network.address == pod["status"]["hostIP"]
        assert f"dev {network.host_if}" in ip("route", "get", internal).stdout

    # the machine's default route leaves it: a simulated address in no namespace must fail here
    slot = cluster.networks["gpu-a"].address.split(".")[2]
    for stray in (f"10.0.{slot}.250", "10.0.0.7", f"10.{128 + int(slot)}.9.9", "10.244.3.3"):
        route = ip("route", "get", stray)
        assert route.returncode != 0 and "No route to host" in route.stderr, (stray, route)
        assert "eth0" not in route.stdout, (stray, route.stdout)

    made = {n.name: (n.host_if, set(n.addresses)) for n in cluster.networks.values()}
    cluster.stop()
    namespaces = ip("netns", "list").stdout
    links = ip("-o", "link", "show").stdout
    routes = ip("route", "show").stdout
    for name, (host_if, addresses) in made.items():
        assert name not in namespaces
        assert host_if not in links
        assert not any(f"{a} " in routes for a in addresses), routes
    assert not [t for t in threading.enumerate() if t.name.startswith("sim-relay")]
    assert not [t for t in threading.enumerate() if t.name.startswith("sim-dcgm")]
    others = [p for p in netns.RUN_DIR.glob("slot-*.lock") if netns.held(int(p.stem[5:]))]
    if not others:  # the last cluster on the machine takes the guard routes away
        assert "unreachable 10.0.0.0/16" not in routes
