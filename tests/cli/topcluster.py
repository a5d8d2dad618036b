"""Helpers for `kubectl gpu top` on the real control plane (test code only).

`PodProxyAnswers` is a proxy in front of the real API server (the `FaultProxy` of
tests/kit/plane/faults.py, which forwards every request unchanged) that answers the pod
proxy's paths (`…/pods/NAME:PORT/proxy/…`) itself, from what a test put in `answers`: the
API server never proxies to a pod, so no traffic leaves the machine, and everything else
(pod and node lists, RBAC) is the real server's. Pods get the IP 127.0.0.1, which the API
server refuses to proxy to: a request that slips past the proxy still goes nowhere.
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.server
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from kubectl_gpu import keys
from kubectl_gpu.usage import document
from kubectl_gpu.usage.readings import GpuReading, MigReading, ProcessReading
from tests.kit.cluster import SimCluster
from tests.kit.kube import objects
from tests.kit.plane.faults import FaultProxy

GIB = 2**30
AGENT_NS = "kubectl-gpu"
LOOPBACK = "127.0.0.1"  # the API server will not proxy to it


@dataclasses.dataclass
class Answer:
    status: int = 200
    body: bytes = b""
    hang: float = 0.0


class PodProxyAnswers(FaultProxy):
    """Answers `…/proxy/<path>` of pod `name` from `answers[(name, path)]`."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.answers: dict[tuple[str, str], Answer] = {}
        self.asked: list[str] = []

    def handle(self, request: http.server.BaseHTTPRequestHandler) -> None:
        path = request.path.split("?", 1)[0]
        if "/proxy/" not in path:
            super().handle(request)
            return
        self.asked.append(path)
        pod_port, _, rest = path.partition("/proxy/")
        pod = pod_port.rsplit("/", 1)[-1].split(":", 1)[0]
        answer = self.answers.get((pod, "/" + rest), Answer(404, b'{"kind":"Status","code":404}'))
        time.sleep(answer.hang)
        request.send_response(answer.status)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(answer.body)))
        request.end_headers()
        request.wfile.write(answer.body)


@contextlib.contextmanager
def answering_proxy(real: SimCluster, tmp: Path) -> Iterator[tuple[PodProxyAnswers, Path]]:
    """A `PodProxyAnswers` before `real`'s API server and a kubeconfig through it, stopped
    when the block ends."""
    creds = real.plane.creds
    assert creds is not None
    proxy = PodProxyAnswers(real.plane.port, creds.serving_cert, creds.serving_key, creds.ca_cert)
    proxy.start()
    try:
        config = yaml.safe_load(real.kubeconfig.read_text())
        for entry in config["clusters"]:
            entry["cluster"]["server"] = proxy.url
        path = tmp / "through-proxy.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        yield proxy, path
    finally:
        proxy.stop()


def gpu_node(real: SimCluster, name: str, strategy: str | None = None) -> None:
    labels = {"nvidia.com/gpu.present": "true"}
    if strategy:
        labels[keys.GPU_SHARING_STRATEGY_LABEL] = strategy
    real.client.create(objects.node(name, labels=labels))


def running_pod(
    real: SimCluster,
    name: str,
    node: str,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
    container_id: str = "",
) -> dict[str, Any]:
    """A Running pod bound to `node` with IP 127.0.0.1; returns it as the server keeps it."""
    pod = objects.pod(name, namespace, node_name=node, labels=labels)
    pod["spec"].update(spec or {})
    pod["status"]["podIP"] = LOOPBACK
    pod["status"]["podIPs"] = [{"ip": LOOPBACK}]
    if container_id:
        pod["status"]["containerStatuses"][0]["containerID"] = f"containerd://{container_id}"
    created = real.client.create(pod)
    assert created["status"].get("podIP") in (None, LOOPBACK), created["status"]
    return created


def agent_pod(real: SimCluster, node: str) -> str:
    """The kubectl-gpu agent's pod on `node` (as the DaemonSet labels it); its name."""
    ensure_namespace(real, AGENT_NS)
    name = f"kubectl-gpu-agent-{node}"
    spec = {
        "containers": [
            {
                "name": "agent",
                "image": "agent:1",
                "ports": [{"name": "usage", "containerPort": 9402}],
            }
        ]
    }
    running_pod(real, name, node, AGENT_NS, {"app.kubernetes.io/name": "kubectl-gpu-agent"}, spec)
    return name


def ensure_namespace(real: SimCluster, name: str) -> None:
    try:
        real.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    except Exception:  # noqa: BLE001 (already there)
        pass


def usage_doc(
    node: str,
    gpus: list[GpuReading],
    processes: list[tuple[str, document.Attributed]],
    held: list[document.Held],
) -> bytes:
    usage = document.NodeUsage(
        node, "test", "2026-11-28T06:00:00Z", tuple(gpus), tuple(processes), tuple(held)
    )
    return json.dumps(usage.to_dict()).encode()


def h100(
    uuid: str, used_gib: float, sm: int | None, mig: tuple[MigReading, ...] = ()
) -> GpuReading:
    return GpuReading(
        0,
        uuid,
        "NVIDIA H100 80GB HBM3",
        80 * GIB,
        int(used_gib * GIB),
        sm,
        "mig" if mig else None,
        bool(mig),
        mig,
    )


def process(
    pid: int,
    gib: float,
    uid: str | None,
    cid: str | None = None,
    sm: int | None = None,
    gi: int | None = None,
    ci: int | None = None,
) -> document.Attributed:
    reading = ProcessReading(pid, int(gib * GIB), gi, ci, sm, "mig" if gi is not None else None)
    return document.Attributed(reading, uid, cid)


def held(
    device_id: str,
    gpu: str | None,
    pod: dict[str, Any],
    replica: int | None = None,
    replicas: int | None = None,
    mig: str | None = None,
    source: str = "podresources",
    resource: str = "nvidia.com/gpu",
) -> document.Held:
    meta = pod["metadata"]
    uid = None if source == "dra" else meta["uid"]  # PodResources names pods; the checkpoint
    return document.Held(  # gives UIDs only to device-plugin allocations
        device_id,
        resource,
        source,
        gpu,
        mig,
        replica,
        replicas,
        meta["namespace"],
        meta["name"],
        uid,
        "main",
    )
