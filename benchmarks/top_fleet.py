"""Benchmark (not a test): `kubectl gpu top -A` on a real kube-apiserver with a fleet of KWOK GPU
nodes whose agents all answer, against `kubectl get pods -A -o json` on the same server.

The fleet is benchmarks.populate's (the device-plugin mix of benchmarks.synthetic and one DRA
node in fifty, every pod Running). Each node gets a kubectl-gpu agent pod in namespace
kubectl-gpu, labelled as the DaemonSet labels it, Running with a pod IP that lives in a network
namespace this benchmark makes (tests/kit/plane/netns.py: one namespace per 250 agent pods,
joined to the host by a veth; the host routes each /32 there and nothing else, so no traffic
leaves the machine). KWOK leaves those pods' status to this benchmark (the LIFECYCLE_BY_TEST
annotation). In each namespace one stand-in HTTP server listens on :9402 and answers
`/v1/usage` with the node of the pod IP it was reached on: a usage document as the agent
writes it (the node's GPUs, one process per held device attributed to its pod, the devices
kubelet handed out), serialised once. So the whole path of `top` is real — its LISTs, the API
server's authentication, authorisation and pod proxy, the proxy's TCP connection to each pod
IP — except the agent process behind the pod IP, whose answer is precomputed.

`kubectl gpu doctor POD` (one Running GPU pod) and `kubectl gpu doctor` (the cluster view) run
on the same fleet. Each command runs as a fresh process, three runs taking turns; reported:
median wall seconds, peak RSS, the ratio to the baseline, the requests the server counted
(its /metrics), the proxy requests the stand-ins answered, and the load average. Needs root
and iproute2 (the network namespaces) and the control plane's binaries (scripts/gobins.py).

Run: `.venv/bin/python -m benchmarks.top_fleet [--nodes 500] [--pods 4000] [--runs 3]
[--skip top]` (at most PER_NAMESPACE × 240 = 60,000 nodes; `--skip top` leaves out `top -A`,
which asks every agent, for a fleet where only the readers of the API server are measured).
"""

from __future__ import annotations

import argparse
import collections
import http.server
import json
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from benchmarks import fleet, machine, populate, synthetic
from kubectl_gpu import cluster, keys
from kubectl_gpu.gpumap.allocations import Gpu
from kubectl_gpu.usage import document
from kubectl_gpu.usage.readings import GpuReading, MigReading, ProcessReading
from tests.kit.plane import netns
from tests.kit.plane.kwok import LIFECYCLE_BY_TEST

AGENT_NS = keys.NAMESPACE
PORT = 9402
PER_NAMESPACE = 250  # pod IPs a node network hands out (netns.NodeNetwork.next_pod_ip)
GIB = 2**30
MEMORY = {"NVIDIA L4": 24 * GIB}  # else 80 GiB (H100 80GB, A100-SXM4-80GB)
MIG_MEMORY = {"1g.10gb": 10 * GIB, "2g.20gb": 20 * GIB, "3g.40gb": 40 * GIB}


def usage_of(node: str, gpus: list[Gpu], allocations: Any, replicas: int) -> bytes:
    """The node's `/v1/usage` answer: each held device's pod runs one process on it."""
    by_uuid = {g.uuid: g for g in gpus}
    mig_parent = {m.uuid: (g, m) for g in gpus for m in g.mig_devices}
    held: list[document.Held] = []
    processes: list[tuple[str, document.Attributed]] = []
    used: collections.Counter[str] = collections.Counter()
    for n, a in enumerate(allocations):
        device = a.device_ids[0]
        uid = f"uid-{node}-{n}"
        head, _, replica = device.partition("::")
        gpu, mig = mig_parent[head] if head in mig_parent else (by_uuid.get(head), None)
        if gpu is None:
            continue
        memory = 2 * GIB if mig is None else GIB
        used[gpu.uuid] += memory
        held.append(document.Held(
            device, a.resource, "podresources", gpu.uuid, mig.uuid if mig else None,
            int(replica) if replica else None, replicas if replica else None,
            a.namespace, a.pod, uid, a.container,
        ))  # fmt: skip
        reading = ProcessReading(
            1000 + n, memory, mig.gi if mig else None, mig.ci if mig else None,
            None if mig else 30, "mig" if mig else None,
        )  # fmt: skip
        processes.append((gpu.uuid, document.Attributed(reading, uid, None)))
    readings = tuple(
        GpuReading(
            g.index or 0,
            g.uuid,
            g.model,
            MEMORY.get(g.model or "", 80 * GIB),
            used[g.uuid],
            None if g.mig_devices else 40,
            "mig" if g.mig_devices else None,
            bool(g.mig_devices),
            tuple(
                MigReading(m.uuid, m.profile, m.gi, m.ci, MIG_MEMORY.get(m.profile or ""), 0)
                for m in g.mig_devices
            ),
        )  # fmt: skip
        for g in gpus
    )
    usage = document.NodeUsage(
        node, "benchmark", "2026-11-28T08:00:00Z", readings, tuple(processes), tuple(held)
    )
    return json.dumps(usage.to_dict(), separators=(",", ":")).encode()


def answers(nodes: int, pods: int) -> Iterator[tuple[str, bytes]]:
    """Every node's name and usage answer, as benchmarks.populate made the fleet."""
    dra = populate.dra_nodes(nodes)
    plugin = nodes - dra
    held = synthetic.held_per_node(plugin, max(0, pods - dra * populate.DRA_GPUS))
    for index in range(plugin):
        kind = synthetic.kind_of(index, plugin)
        built = synthetic.node_report(index, kind, held[index])
        gpus = synthetic.gpus_of(index, kind)
        yield built.node, usage_of(built.node, gpus, built.allocations, kind.replicas)
    for index in range(dra):  # claims hold their GPUs; the answer shows the GPUs alone
        gpus = [Gpu(g.index, g.uuid, g.model) for g in populate._dra_gpus(index)]
        yield populate._dra_node_name(index), usage_of(populate._dra_node_name(index), gpus, (), 1)


class Agents:
    """The stand-in agents: pod IPs in network namespaces, a server per namespace."""

    def __init__(self) -> None:
        self.slot = netns.Slot.acquire()
        self.networks: list[netns.NodeNetwork] = []
        self.servers: list[http.server.ThreadingHTTPServer] = []
        self.body: dict[str, bytes] = {}  # pod IP → answer
        self.asked = 0
        self._lock = threading.Lock()

    def address(self, index: int) -> str:
        if index // PER_NAMESPACE >= len(self.networks):
            network = netns.NodeNetwork(self.slot, f"agents-{len(self.networks)}",
                                        len(self.networks)).create()  # fmt: skip
            self.networks.append(network)
            self._serve(network)
        network = self.networks[index // PER_NAMESPACE]
        ip = network.next_pod_ip()
        network.add_address(ip)
        return ip

    def _serve(self, network: netns.NodeNetwork) -> None:
        agents = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                body = agents.body.get(self.connection.getsockname()[0])
                with agents._lock:
                    agents.asked += 1
                if self.path != "/v1/usage" or body is None:
                    body, status = b"not found", 404
                else:
                    status = 200
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        server = http.server.ThreadingHTTPServer(("0.0.0.0", PORT), Handler, False)
        server.socket = network.listen("0.0.0.0", PORT, backlog=256)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, name="top-agents", daemon=True).start()
        self.servers.append(server)

    def stop(self) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()
        for network in self.networks:
            network.destroy()
        self.slot.release()


def agent_pods(plane: Any, agents: Agents, nodes: int, pods: int) -> int:
    """One Running agent pod per node, its IP answered by `agents`."""
    writer = populate.Writer(plane)
    writer.create(cluster.path("namespaces"), {"apiVersion": "v1", "kind": "Namespace",
                                                "metadata": {"name": AGENT_NS}})  # fmt: skip
    writer.create(cluster.path("serviceaccounts", namespace=AGENT_NS),
                  {"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": "default", "namespace": AGENT_NS}})  # fmt: skip
    jobs = [(i, node, body) for i, (node, body) in enumerate(answers(nodes, pods))]
    for i, _node, body in jobs:
        agents.body[agents.address(i)] = body  # addresses in order, before any pod exists
    ips = list(agents.body)

    def one(job: tuple[int, str, bytes]) -> int:
        i, node, _ = job
        name = f"kubectl-gpu-agent-{i:05d}"
        pod = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": AGENT_NS,
                         "labels": {keys.APP_NAME_LABEL: "kubectl-gpu-agent"},
                         "annotations": {LIFECYCLE_BY_TEST: "true"}},
            "spec": {"nodeName": node, "containers": [{
                "name": "agent", "image": "kubectl-gpu-agent:bench",
                "ports": [{"name": "usage", "containerPort": PORT}]}]},
        }  # fmt: skip
        path = cluster.path("pods", namespace=AGENT_NS)
        writer.create(path, pod)
        writer.patch_status(cluster.path("pods", name, AGENT_NS), {
            "phase": "Running", "podIP": ips[i], "podIPs": [{"ip": ips[i]}],
            "conditions": [{"type": "Ready", "status": "True"}],
        })  # fmt: skip
        return 1

    return populate.run_all_of(jobs, one)


def measure(nodes: int, pods: int, runs: int, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    plane = populate.fleet_plane()
    plane.start(timeout=180)
    agents = Agents()
    try:
        made = populate.populate(plane, nodes, pods)
        made["running"] = populate.running(plane)
        started = time.monotonic()
        made["agents"] = agent_pods(plane, agents, nodes, pods)
        made["agent seconds"] = time.monotonic() - started
        print(f"populated: {made}", file=sys.stderr, flush=True)
        k = [str(plane.kubectl), "--kubeconfig", str(plane.kubeconfig)]
        g = [str(fleet.BIN / "kubectl-gpu"), "--kubeconfig", str(plane.kubeconfig)]
        # one Running GPU pod to diagnose: `doctor POD` reads its node's pods, not the fleet's
        some = populate.Writer(plane).get(
            cluster.path("pods", namespace=synthetic.NAMESPACES[0]) + "?limit=1"
        )["items"][0]["metadata"]
        commands = {
            fleet.BASELINE: [*k, "get", "pods", "-A", "-o", "json"],
            "kubectl gpu top -A": [*g, "top", "-A"],
            "kubectl gpu top -A -o json": [*g, "top", "-A", "-o", "json"],
            "kubectl gpu doctor POD": [*g, "doctor", "-n", some["namespace"], some["name"]],
            "kubectl gpu doctor (cluster)": [*g, "doctor"],
        }
        commands = {n: argv for n, argv in commands.items() if not any(s in n for s in skip)}
        walls: dict[str, list[float]] = collections.defaultdict(list)
        peaks: dict[str, float] = collections.defaultdict(float)
        codes: dict[str, int] = {}
        calls: dict[str, collections.Counter[str]] = {}
        asked: dict[str, int] = {}
        loads = []
        for _ in range(runs):
            for name, argv in commands.items():
                before, before_asked = fleet.counters(plane), agents.asked
                wall, rss, code = fleet.run(argv)
                calls[name] = fleet.counters(plane) - before
                asked[name] = agents.asked - before_asked
                walls[name].append(wall)
                peaks[name] = max(peaks[name], rss)
                codes[name] = code
                loads.append(machine.load())
        return {"nodes": nodes, "pods": pods, "version": plane.server_version(), "made": made,
                "walls": walls, "peaks": peaks, "codes": codes, "calls": calls,
                "asked": asked, "loads": loads}  # fmt: skip
    finally:
        agents.stop()
        plane.stop()


def report(found: dict[str, Any]) -> None:
    print(f"machine: {machine.describe()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"{found['nodes']} KWOK GPU nodes, {found['pods']} GPU pods and {found['made']['agents']}"
          f" answering agent pods, kube-apiserver {found['version']}")  # fmt: skip
    print(f"load average after each run: {'; '.join(found['loads'])}")
    base = statistics.median(found["walls"][fleet.BASELINE])
    print(f"{'command':28} {'wall s':>7} {'x get pods':>10} {'peak MiB':>9} exit  agents asked  "
          "requests")  # fmt: skip
    for name, walls in found["walls"].items():
        wall = statistics.median(walls)
        reads = ", ".join(f"{n} {v}" for v, n in sorted(found["calls"][name].items())
                          if fleet._read(v, n))  # fmt: skip
        print(f"{name:28} {wall:7.2f} {wall / base:10.2f} {found['peaks'][name]:9.0f} "
              f"{found['codes'][name]:4}  {found['asked'][name]:12}  {reads}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=4000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--skip", action="append", default=[], help="leave out the commands naming this ('top')"
    )
    options = parser.parse_args()
    if options.nodes > PER_NAMESPACE * netns.MAX_NODES:
        parser.error(f"--nodes: at most {PER_NAMESPACE * netns.MAX_NODES} agents")
    report(measure(options.nodes, options.pods, options.runs, tuple(options.skip)))


if __name__ == "__main__":
    main()
