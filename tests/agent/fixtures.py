"""The node agent's fixtures, registered for the whole suite by `pytest_plugins` in
tests/conftest.py (no test imports them): `agent` (one reconcile pass on a simulated node, in
the test's process), `background_agent` (passes in a thread while the CLI waits, the agent's
pod on the node), `agent_fleet` (real agent processes on the real kube-apiserver), and the
autouse guard that puts back what `kubectl_gpu.agent.main` does to logging. Also the helpers
their tests share: our MIG ConfigMap, a node's desired label and annotations, and `node_nvml`:
a node's GPUs served to the test's pynvml by the simulated nodes' C library,
libnvidia-ml.so.1 (docs/simulated-nvml.md), as the agent's own process would be."""

from __future__ import annotations

import dataclasses
import json
import logging
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from kubectl_gpu import agent as agent_main
from kubectl_gpu import cluster as api_client
from kubectl_gpu import errors, keys
from kubectl_gpu.agent import reconcile
from kubectl_gpu.mig.apply import Start
from kubectl_gpu.workflows.waiting import Timing
from tests.gpumap.test_report_crd_matches_the_schema import crd
from tests.kit.cluster import SimCluster
from tests.kit.kube import ApiError
from tests.kit.kube import manifests as m
from tests.kit.node.agent import spawn
from tests.kit.node.libnvml.clib import served_by_c
from tests.kit.node.libnvml.driver import lay_out
from tests.kit.node.libnvml.library import FakeLibNvml
from tests.kit.plane.plane import ControlPlane

FAST = Timing(poll=0.05, first_poll=0.01)


@pytest.fixture(autouse=True)
def _agent_logging_stays_in_its_test() -> Iterator[None]:
    """`kubectl_gpu.agent.main` configures logging for its own process (basicConfig, a quieter
    checkpoint reader); in-process it would leak into later CLI tests (`-v 1` then hides the
    checkpoint reader's notes). Restore what it changes."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    kubelet_level = logging.getLogger("kubectl_gpu.kubelet").level
    yield
    root.handlers[:], root.level = handlers, level
    logging.getLogger("kubectl_gpu.kubelet").setLevel(kubelet_level)


def mig_doc(**configs: dict[str, int] | None) -> dict[str, Any]:
    """A mig-parted file: name → mig-devices (None: MIG disabled)."""
    return {
        "version": "v1",
        "mig-configs": {
            name.replace("_", "-"): [
                {"devices": "all", "mig-enabled": devices is not None, "mig-devices": devices or {}}
                if devices is not None
                else {"devices": "all", "mig-enabled": False}
            ]
            for name, devices in configs.items()
        },
    }


def store_config(cluster: SimCluster, name: str, devices: dict[str, int] | None) -> None:
    """Put config `name` into our ConfigMap as the CLI does (one key per name)."""
    store_text(cluster, name, json.dumps(mig_doc(**{name.replace("-", "_"): devices}), indent=2))


def store_text(cluster: SimCluster, name: str, text: str) -> None:
    """Put `text` into our ConfigMap under key `name`, as anyone with write access could."""
    try:
        cluster.client.create(m.namespace(keys.NAMESPACE))
    except Exception:  # noqa: BLE001 (already there)
        pass
    try:
        cluster.client.get("configmaps", keys.MIG_CONFIGMAP, keys.NAMESPACE)
    except Exception:  # noqa: BLE001
        cluster.client.create(m.configmap(keys.MIG_CONFIGMAP, keys.NAMESPACE, {name: text}))
        return
    cluster.client.patch(
        "configmaps", keys.MIG_CONFIGMAP, {"data": {name: text}}, namespace=keys.NAMESPACE
    )


def ask(cluster: SimCluster, node: str, name: str, **annotations: str) -> None:
    """Set the desired label (and annotations) on a node."""
    body = {"metadata": {"labels": {keys.MIG_DESIRED_LABEL: name}, "annotations": annotations}}
    cluster.client.patch("nodes", node, body)


def labels(cluster: SimCluster, node: str) -> dict[str, str]:
    return dict(cluster.client.get("nodes", node)["metadata"].get("labels") or {})


def notes(cluster: SimCluster, node: str) -> dict[str, str]:
    return dict(cluster.client.get("nodes", node)["metadata"].get("annotations") or {})


Agent = Callable[..., Start]


def node_nvml(cluster: SimCluster, node: str) -> AbstractContextManager[FakeLibNvml]:
    """`node`'s GPUs served to pynvml in this process by the node's libnvidia-ml.so.1 (its
    driver root made here when the cluster runs no node side); the test hooks of
    `cluster.nvml(node)` (processes, resets, a lost driver) reach the library through the
    node's state file."""
    sim = cluster.nodes[node]
    if sim.state_file is None:
        sim.share_state(lay_out(cluster.kubeconfig.parent / "nodes" / node / "driver").state)
    assert sim.state_file is not None
    return served_by_c(sim.nvml, sim.state_file)


@pytest.fixture
def agent() -> Agent:
    """`agent(cluster, node, timeout=…, reset=…, socket=…)`: one reconcile pass on `node`."""

    def run(
        cluster: SimCluster,
        node: str,
        *,
        timeout: float = 5.0,
        reset: Any = None,
        socket: Path | None = None,
    ) -> Start:
        api = api_client.connect(str(cluster.kubeconfig))
        options = reconcile.Options(node, timeout=timeout, reset=reset, kubelet_socket=socket)
        with node_nvml(cluster, node):
            start = reconcile.reconcile(api, options, FAST)
        cluster.settle()
        return start

    return run


@dataclasses.dataclass(frozen=True)
class Fleet:
    """GPU nodes with the real agent running on each, on the real kube-apiserver: all a test
    may use (the API, each agent's requests as the server's audit log counts them)."""

    kubeconfig: Path  # the test's own credentials (not the agents')
    nodes: tuple[str, ...]
    resync: float  # the agents' --resync, longer than any test waits
    requests: Callable[[str], list[str]]  # "VERB path?query" the agent of a node sent so far


FLEET_RESYNC = 3600.0


@pytest.fixture
def agent_fleet(control_plane: ControlPlane, tmp_path: Path) -> Iterator[Fleet]:
    """Three L4 nodes whose agents run as their own processes, the GPUNodeReport CRD
    installed; requests are counted at the real kube-apiserver by user agent (its audit log)."""
    yield from _real_fleet(control_plane, tmp_path)


def _real_fleet(plane: ControlPlane, tmp_path: Path) -> Iterator[Fleet]:
    """KWOK nodes on the real control plane, each with the real agent as a process of its
    own (the NVML stand-in behind it, as on a simulated node)."""
    api = api_client.connect(str(plane.kubeconfig))
    nodes = tuple(f"fleet-gpu-{i}" for i in range(1, 4))
    _create(api, "customresourcedefinitions", crd())
    _create(api, "namespaces", m.namespace(keys.NAMESPACE))
    for node in nodes:
        labels = {"nvidia.com/gpu.present": "true"}
        _create(api, "nodes", {"apiVersion": "v1", "kind": "Node",
                               "metadata": {"name": node, "labels": labels}})  # fmt: skip
    _established(api, "gpunodereports.kubectl-gpu.io")
    agents = [
        spawn(plane.kubeconfig, node, i, tmp_path / node, "--interval", "0.5",
              "--resync", str(FLEET_RESYNC))
        for i, node in enumerate(nodes)
    ]  # fmt: skip
    try:
        yield Fleet(
            plane.kubeconfig,
            nodes,
            FLEET_RESYNC,
            lambda n: plane.requests(agent_main.user_agent(n)),
        )
    finally:
        for process in agents:
            process.terminate()
        for process in agents:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
        # the plane as new for the next test (the report CRD, our namespace, the nodes):
        # a simulated cluster's next `reportbuilders.install` would meet the CRD otherwise
        from tests.kit.plane import sharedplane

        sharedplane.reset()


def _create(api: api_client.Api, resource: str, body: dict[str, Any]) -> None:
    try:
        api.create(api_client.path(resource), body)
    except errors.ClusterError as e:
        if e.status != 409:
            raise


def _established(api: api_client.Api, name: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = api.get(api_client.path("customresourcedefinitions", name))
        conditions = (found.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
            return
        time.sleep(0.2)
    raise AssertionError(f"the CRD {name} was never established")


def agent_pod(cluster: SimCluster, node: str) -> None:
    """The agent DaemonSet's pod on `node`, Running (what `mig apply` looks for before it
    waits or drains); the agent's passes themselves run in the test's process."""
    try:
        cluster.client.get("namespaces", keys.NAMESPACE)
    except ApiError:
        cluster.client.create({"apiVersion": "v1", "kind": "Namespace",
                              "metadata": {"name": keys.NAMESPACE}})  # fmt: skip
    try:
        cluster.client.create({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"kubectl-gpu-agent-{node}", "namespace": keys.NAMESPACE,
                         "labels": {"app.kubernetes.io/name": "kubectl-gpu-agent"}},
            "spec": {"nodeName": node, "containers": [{"name": "agent", "image": "agent"}]},
        })  # fmt: skip
    except ApiError:
        return  # there already
    cluster.settle()


@pytest.fixture
def background_agent(agent: Agent) -> Iterator[Callable[[SimCluster, str], None]]:
    """Agent passes on a node in a thread, as the DaemonSet's loop would, while the CLI waits;
    its pod is on the node."""
    stop, failures, threads = threading.Event(), [], []

    def start(cluster: SimCluster, node: str) -> None:
        agent_pod(cluster, node)

        def loop() -> None:
            while not stop.is_set():
                try:
                    agent(cluster, node)
                except Exception as e:  # noqa: BLE001 (reported by the test)
                    failures.append(e)
                    return
                stop.wait(0.05)

        thread = threading.Thread(target=loop, name="agent-loop", daemon=True)
        threads.append(thread)
        thread.start()

    yield start
    stop.set()
    for thread in threads:
        thread.join(10)
    assert not failures, failures
