"""Puts a fleet into a real kube-apiserver fast: the fleet benchmarks' populator.

What made it slow (1,000 nodes / 8,000 pods at about 65 objects/s): KWOK renewing each node's
Lease every quarter of its 40 s duration (100 writes/s at 1,000 nodes, 500 at 5,000), the
audit log writing two events per request, the controller-manager reacting to every object, and
a client that opened a new TLS connection for most requests (urllib3's pool of 10 behind 16
threads). Here: the plane runs without audit log or controller-manager and with 1 h leases
(`fleet_plane`); Nodes are created with their status already Ready (KWOK's initialising write
is skipped), pods bound to their node (no scheduler), and each worker thread keeps one
keep-alive connection and sends pre-serialised JSON. What is left is the server's own work per
object (admission, validation, etcd) and KWOK's one status write per pod that makes it Running.

Must not time readers (benchmarks.fleet does).
"""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from benchmarks import synthetic
from kubectl_gpu import cluster
from kubectl_gpu.workflows import reports
from tests.kit.cluster import drastandin
from tests.kit.kube import objects

DRA_NAMESPACE = "dra-jobs"
DRA_GPUS = 8  # per DRA node: one claim and one pod per GPU
WORKERS = 24


def fleet_plane(**options: Any) -> Any:
    """The control plane as the fleet benchmarks run it (the differences from the tests' plane
    are listed in docs/performance.md): no audit log, no controller-manager (whose node
    lifecycle controller would mark nodes with hour-long leases unreachable and evict their
    pods), no scheduler, KWOK leases of an hour."""
    from tests.kit.plane.plane import ControlPlane

    options = {"controllers": False, "scheduler": False, "audit": False,
               "node_lease_seconds": 3600, **options}  # fmt: skip
    return ControlPlane(**options)


class Writer:
    """POSTs and PATCHes on keep-alive connections, one per thread; retries what a busy or
    not-yet-ready server refuses."""

    def __init__(self, plane: Any) -> None:
        self.host = "127.0.0.1"
        self.port = plane.port
        self.token = plane.creds.admin_token
        self.context = ssl.create_default_context(cafile=str(plane.creds.ca_cert))
        self.local = threading.local()
        self.retried = 0

    def _connection(self) -> http.client.HTTPSConnection:
        found = getattr(self.local, "connection", None)
        if found is None:
            found = http.client.HTTPSConnection(self.host, self.port, context=self.context)
            self.local.connection = found
        return found

    def send(self, method: str, path: str, body: bytes, content: str = "application/json") -> Any:
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": content}
        for attempt in range(30):
            connection = self._connection()
            try:
                connection.request(method, path, body, headers)
                answer = connection.getresponse()
                payload = answer.read()
            except (OSError, http.client.HTTPException):
                connection.close()
                self.local.connection = None
                time.sleep(0.2)
                continue
            if answer.status == 409 and method == "POST":
                return None  # made by an earlier, interrupted run of the step
            if answer.status < 300:
                return json.loads(payload)
            if answer.status in (403, 429, 500, 503, 504):  # not ready yet, or busy
                self.retried += 1
                time.sleep(min(2.0, 0.1 * 2**attempt))
                continue
            raise RuntimeError(f"{method} {path}: {answer.status} {payload[:300]!r}")
        raise RuntimeError(f"{method} {path}: gave up")

    def create(self, path: str, obj: dict[str, Any]) -> Any:
        return self.send("POST", path, json.dumps(obj, separators=(",", ":")).encode())

    def patch_status(self, path: str, status: dict[str, Any]) -> Any:
        body = json.dumps({"status": status}, separators=(",", ":")).encode()
        return self.send("PATCH", f"{path}/status", body, "application/merge-patch+json")

    def get(self, path: str) -> Any:
        return self.send("GET", path, b"")


def run_all_of(jobs: Iterable[Any], one: Callable[[Any], int], workers: int = WORKERS) -> int:
    """`one(job)` for every job on `workers` threads; the sum of what they return."""
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return sum(pool.map(one, jobs))


def _fresh(obj: dict[str, Any]) -> dict[str, Any]:
    for key in ("uid", "resourceVersion", "creationTimestamp"):
        obj["metadata"].pop(key, None)
    return obj


def dra_nodes(nodes: int) -> int:
    """How many of the fleet's nodes are DRA nodes (NVIDIA's DRA driver, no device plugin):
    one in fifty, at least one."""
    return max(1, nodes // 50)


def populate(plane: Any, nodes: int, pods: int) -> dict[str, float]:
    """The fleet: `nodes` GPU nodes (benchmarks.synthetic's device-plugin mix, and
    `dra_nodes(nodes)` DRA nodes of 8 H100s, each GPU held by a ResourceClaim reserved for a
    pod), `pods` running pods in all, a GPUNodeReport per device-plugin node. Returns objects
    created and seconds per step."""
    from tests.gpumap.test_report_crd_matches_the_schema import crd

    writer = Writer(plane)
    began = time.monotonic()
    writer.create(cluster.path("customresourcedefinitions"), crd())
    for obj in drastandin.device_classes("v1"):
        writer.create(cluster.path("deviceclasses"), obj)
    for namespace in [*synthetic.NAMESPACES, DRA_NAMESPACE]:
        writer.create(cluster.path("namespaces"), {"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": namespace}})  # fmt: skip
        # what the controller-manager would make; a pod without it is refused
        writer.create(cluster.path("serviceaccounts", namespace=namespace),
                      {"apiVersion": "v1", "kind": "ServiceAccount",
                       "metadata": {"name": "default", "namespace": namespace}})  # fmt: skip
    dra = dra_nodes(nodes)
    plugin_nodes = nodes - dra
    plugin_pods = max(0, pods - dra * DRA_GPUS)
    held = synthetic.held_per_node(plugin_nodes, plugin_pods)
    steps: dict[str, float] = {}
    created = 0

    uids: dict[int, str] = {}

    def node(index: int) -> int:
        obj = _fresh(synthetic.node_object(index, synthetic.kind_of(index, plugin_nodes)))
        made = writer.create(cluster.path("nodes"), obj)
        if made is None:  # made by an earlier, interrupted run
            made = writer.get(cluster.path("nodes", obj["metadata"]["name"]))
        uids[index] = made["metadata"]["uid"]
        return 1

    started = time.monotonic()
    created += run_all_of(range(plugin_nodes), node)
    created += run_all_of(range(dra), lambda i: _dra_node(writer, i))
    steps["nodes"] = time.monotonic() - started
    wait_established(writer)

    def node_report(index: int) -> int:
        built = synthetic.node_report(index, synthetic.kind_of(index, plugin_nodes), held[index])
        writer.create(cluster.path("gpunodereports"), reports.body(built, uids[index], None))
        return 1

    started = time.monotonic()
    created += run_all_of(range(plugin_nodes), node_report)
    steps["reports"] = time.monotonic() - started

    def pod(obj: dict[str, Any]) -> int:
        obj.pop("status", None)  # KWOK runs it
        path = cluster.path("pods", namespace=obj["metadata"]["namespace"])
        writer.create(path, _fresh(obj))
        return 1

    started = time.monotonic()
    created += run_all_of(_plugin_pods(plugin_nodes, held), pod)
    steps["pods"] = time.monotonic() - started
    started = time.monotonic()
    created += run_all_of(range(dra), lambda i: _dra_claims(writer, i))
    steps["dra claims and pods"] = time.monotonic() - started
    steps["objects"] = created
    steps["total"] = time.monotonic() - began
    steps["retried"] = writer.retried
    return steps


def _plugin_pods(nodes: int, held: list[int]) -> Iterator[dict[str, Any]]:
    for index in range(nodes):
        built = synthetic.node_report(index, synthetic.kind_of(index, nodes), held[index])
        yield from synthetic.pods_of(built)


def wait_established(writer: Writer) -> None:
    path = cluster.path("customresourcedefinitions", "gpunodereports.kubectl-gpu.io")
    for _ in range(100):
        conditions = writer.get(path).get("status", {}).get("conditions") or []
        if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            return
        time.sleep(0.1)
    raise RuntimeError("the GPUNodeReport CRD was never established")


def _dra_gpus(index: int) -> list[drastandin.DraGpu]:
    return [
        drastandin.DraGpu(g, f"GPU-dra{index:05x}-{g:04x}-4000-8000-000000000000",
                         model="NVIDIA H100 80GB HBM3")
        for g in range(DRA_GPUS)
    ]  # fmt: skip


def _dra_node_name(index: int) -> str:
    return f"dra-node-{index:04d}"


def _dra_node(writer: Writer, index: int) -> int:
    name = _dra_node_name(index)
    writer.create(cluster.path("nodes"), objects.node(name))
    for obj in drastandin.resource_slices(name, _dra_gpus(index), "v1"):
        writer.create(cluster.path("resourceslices"), obj)
    return 1


def _dra_claims(writer: Writer, index: int) -> int:
    """Each GPU of the node: a pod that names its claim, the claim, and the claim's status as the
    scheduler writes it (allocated on this node's pool, reserved for the pod)."""
    node = _dra_node_name(index)
    created = 0
    for gpu in range(DRA_GPUS):
        name = f"{node}-job-{gpu}"
        pod = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": DRA_NAMESPACE},
            "spec": {
                "nodeName": node,
                "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
                "containers": [{"name": "cuda", "image": "registry.example/cuda:12",
                                "resources": {"claims": [{"name": "gpu"}]}}],
            },
        }  # fmt: skip
        made = writer.create(cluster.path("pods", namespace=DRA_NAMESPACE), pod)
        claim = {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": DRA_NAMESPACE},
            "spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
        }  # fmt: skip
        path = cluster.path("resourceclaims", namespace=DRA_NAMESPACE)
        writer.create(path, claim)
        if made is None:
            continue
        status = {
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": drastandin.DRIVER,
                                         "pool": node, "device": f"gpu-{gpu}"}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
            },
            "reservedFor": [{"resource": "pods", "name": name,
                             "uid": made["metadata"]["uid"]}],
        }  # fmt: skip
        writer.patch_status(f"{path}/{name}", status)
        created += 2
    return created


def running(plane: Any, timeout: float = 1800) -> float:
    """Seconds until KWOK has made every pod Running (counted by the server: a LIST of one pod
    that is not, and its remainingItemCount)."""
    writer = Writer(plane)
    selector = urllib.parse.quote("status.phase!=Running")
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        page = writer.get(f"/api/v1/pods?fieldSelector={selector}&limit=1")
        left = len(page["items"]) + int(page["metadata"].get("remainingItemCount") or 0)
        if not left:
            return time.monotonic() - started
        time.sleep(2)
    raise RuntimeError("KWOK did not run every pod in time")


def cpu_seconds(plane: Any) -> dict[str, float]:
    """CPU seconds (user+system) each component and this process used so far: where the
    population's cost goes."""
    import os
    import resource

    tick = os.sysconf("SC_CLK_TCK")
    found = {}
    for component in plane.components:
        fields = open(f"/proc/{component.process.pid}/stat").read().rsplit(")", 1)[1].split()
        found[component.name] = round((int(fields[11]) + int(fields[12])) / tick, 1)
    own = resource.getrusage(resource.RUSAGE_SELF)
    found["populator (python)"] = round(own.ru_utime + own.ru_stime, 1)
    return found


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description="Populate a fleet plane and say how fast.")
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=4000)
    options = parser.parse_args()
    plane = fleet_plane()
    plane.start(timeout=180)
    try:
        made = populate(plane, options.nodes, options.pods)
        made["running"] = running(plane)
        print(f"{made}; {made['objects'] / made['total']:.0f} objects/s")
        print(f"CPU seconds: {cpu_seconds(plane)}")
    finally:
        plane.stop()


if __name__ == "__main__":
    main()
