"""Benchmark (not a test): `kubectl gpu mig apply --drain` across a fleet of simulated GPU nodes
on the real control plane, each node with its own agent process and its own GPUs.

The fleet is the test kit's `SimCluster` on a control plane of its own (etcd, kube-apiserver with
its audit log, the controller-manager with the ReplicaSet and disruption controllers, the
scheduler, KWOK): N nodes of `--gpus` H100s, NVIDIA's device plugin (MIG strategy mixed) and GFD
as its Helm chart lays them out, each node's plugin NVIDIA's own binary behind a kubelet stand-in
that publishes what it advertises, and `kubectl gpu install`'s agent DaemonSet, whose pod on each
node runs the real `kubectl-gpu-agent` as a process of its own over that node's NVML (the
project's libnvidia-ml.so.1 under the node's driver root, tests/kit/node/libnvml). On every node
a ReplicaSet of its own (pinned to it) runs a pod on each GPU, under a PodDisruptionBudget the
real disruption controller has counted. Then, timed:

    kubectl gpu mig apply -f mig.yaml -c balanced --all --drain --max-unavailable M -o json

which cordons each batch's nodes, evicts their pods through the Eviction API, asks each agent
for the layout, waits for it, and uncordons. Measured: wall time and its batches (from the
command's own progress lines), the requests it made (the audit log, by the command's user
agent: per node, by verb and resource), the agents' requests in the same window, the evictions
the server answered (201 and 429), and every node's final state: its MIG request applied
(`kubectl-gpu.io/mig.state=success`), uncordoned, no drain record left, and its allocatable
holding the MIG resources the config makes (NVIDIA's plugin re-enumerated them). Also the
memory of the node-side processes, per node, which bounds how many nodes fit the machine.

Run: `.venv/bin/python -m benchmarks.mig_drain [--nodes 20] [--max-unavailable 5] [--gpus 2]`.
Needs root and `unshare` (NVIDIA's plugin runs in a node sandbox) and the built binaries.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import machine, processes
from kubectl_gpu import keys

BIN = Path(sys.executable).parent
MODEL = "H100-SXM5-80GB"
CONFIG = "balanced"
PER_GPU = {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}  # the seven slices of an H100
CLI_AGENT = "OpenAPI-Generator"  # the kubernetes client's user agent, which the command keeps
AGENT = "kubectl-gpu-agent/"
Obj = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class NodeEnd:
    """One node as the command left it."""

    name: str
    state: str  # kubectl-gpu.io/mig.state
    desired: str  # kubectl-gpu.io/mig.config
    cordoned: bool
    drain_record: bool
    allocatable: dict[str, int]  # nvidia.com/gpu and nvidia.com/mig-*

    def done(self, gpus: int) -> bool:
        wanted = {f"nvidia.com/mig-{p}": n * gpus for p, n in PER_GPU.items()}
        mig = {k: v for k, v in self.allocatable.items() if k.startswith("nvidia.com/mig-")}
        return (
            (self.state, self.desired) == ("success", CONFIG)
            and not self.cordoned
            and not self.drain_record
            and mig == wanted
            and self.allocatable.get("nvidia.com/gpu", 0) == 0
        )


@dataclasses.dataclass
class Result:
    nodes: int
    gpus: int
    max_unavailable: int
    version: str = ""
    setup_s: float = 0.0  # cluster, install, every agent reporting, every pod Running
    wall_s: float = 0.0
    exit: int = -1
    lines: list[tuple[float, str]] = dataclasses.field(default_factory=list)  # stderr
    rows: list[Obj] = dataclasses.field(default_factory=list)  # the command's result rows
    calls: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    agent_calls: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    evictions: collections.Counter[int] = dataclasses.field(default_factory=collections.Counter)
    pod_lists: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    ends: list[NodeEnd] = dataclasses.field(default_factory=list)
    allocatable_after_s: float = 0.0  # after the command's end, until every node's was right
    replacements_pending: int = 0
    rss_mib: dict[str, float] = dataclasses.field(default_factory=dict)  # by program
    agent_logs: dict[str, str] = dataclasses.field(default_factory=dict)  # nodes not done

    @property
    def requests(self) -> int:
        return sum(self.calls.values())


def _wait(what: str, check: Callable[[], Any], timeout: float) -> float:
    """Seconds until `check()` is truthy, looked at every second; RuntimeError at `timeout`."""
    began = time.monotonic()
    while not check():
        if time.monotonic() - began > timeout:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(1.0)
    return time.monotonic() - began


def mig_file(directory: Path) -> Path:
    """A mig-parted config with `balanced`: every GPU in MIG mode, cut into PER_GPU."""
    doc = {"version": "v1", "mig-configs": {CONFIG: [
        {"devices": "all", "mig-enabled": True, "mig-devices": PER_GPU}]}}  # fmt: skip
    path = directory / "mig.yaml"
    path.write_text(json.dumps(doc, indent=2))
    return path


def workloads(cluster: Any, names: list[str], gpus: int) -> None:
    """On each node a ReplicaSet of `gpus` pods pinned to it (one whole GPU each) and its
    budget: at most `gpus` of them disrupted, so every eviction passes the budget's check once
    the disruption controller has counted it (a pinned replacement stays Pending until the
    node is back, and after the change finds no whole GPU there)."""
    for node in names:
        labels = {"app": f"train-{node}"}
        spec = {"nodeSelector": {"kubernetes.io/hostname": node},
                "containers": [{"name": "main", "image": "nvcr.io/nvidia/cuda:12.4.1-base",
                                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}  # fmt: skip
        cluster.store.create({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": f"train-{node}", "namespace": "default", "labels": labels},
            "spec": {"replicas": gpus, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": spec}},
        })  # fmt: skip
        cluster.store.create({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": f"train-{node}", "namespace": "default"},
            "spec": {"maxUnavailable": gpus, "selector": {"matchLabels": labels}},
        })  # fmt: skip

    def running() -> bool:
        pods = cluster.store.list("pods", "default")
        up = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
        return len(up) == len(names) * gpus

    def counted() -> bool:
        budgets = cluster.store.list("poddisruptionbudgets", "default")
        return len(budgets) == len(names) and all(
            (b.get("status") or {}).get("disruptionsAllowed") == gpus for b in budgets
        )

    _wait("every training pod to run", running, 60 + 3.0 * len(names))
    _wait("the disruption controller to count every budget", counted, 60 + len(names))


def install_agents(cluster: Any, names: list[str]) -> None:
    """`kubectl gpu install` (the agent beside the Helm plugin), then every agent's report."""
    from tests.kit.kube.errors import ApiError

    command = [str(BIN / "kubectl-gpu"), "--kubeconfig", str(cluster.kubeconfig), "install",
               "--mode", "operator", "--operator-namespace", "nvidia-device-plugin"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"kubectl gpu install failed: {done.stderr}")

    def reported() -> bool:
        try:
            return len(cluster.store.list("gpunodereports")) == len(names)
        except ApiError:  # the CRD the install just made is not served yet
            return False

    _wait("every agent's report", reported, 60 + 3.0 * len(names))


def _audit_since(plane: Any, offset: int) -> list[Obj]:
    if plane.audit_log.stat().st_size < offset:  # rotated: the count would be silently short
        raise RuntimeError(f"{plane.audit_log} was rotated during the run; nothing to count")
    with plane.audit_log.open() as log:
        log.seek(offset)
        return [json.loads(line) for line in log if line.strip()]


def count(result: Result, events: list[Obj]) -> None:
    """The command's and the agents' requests, and the evictions' answers."""
    for e in events:
        agent, ref = str(e.get("userAgent", "")), e.get("objectRef") or {}
        what = f"{e['verb']} {ref.get('resource', '')}"
        if ref.get("subresource"):
            what += f"/{ref['subresource']}"
        if e.get("stage") == "ResponseComplete":
            if agent.startswith(CLI_AGENT) and what == "create pods/eviction":
                result.evictions[int((e.get("responseStatus") or {}).get("code", 0))] += 1
            continue
        if e.get("stage") != "RequestReceived":
            continue
        if agent.startswith(CLI_AGENT):
            result.calls[what] += 1
            if what == "list pods":
                scoped = "spec.nodeName" in e.get("requestURI", "")
                result.pod_lists["one node" if scoped else "not scoped to a node"] += 1
        elif agent.startswith(AGENT):
            result.agent_calls[what] += 1


def node_end(node: Obj) -> NodeEnd:
    meta, status = node["metadata"], node.get("status") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    allocatable = {k: int(v) for k, v in (status.get("allocatable") or {}).items()
                   if k.startswith("nvidia.com/")}  # fmt: skip
    return NodeEnd(
        meta["name"], labels.get(keys.MIG_STATE_LABEL, ""), labels.get(keys.MIG_DESIRED_LABEL, ""),
        bool((node.get("spec") or {}).get("unschedulable")),
        keys.DRAIN_ANNOTATION in annotations, allocatable,
    )  # fmt: skip


def apply(cluster: Any, result: Result, directory: Path) -> None:
    """The timed command; its stderr lines as they come, its JSON document at the end."""
    command = [str(BIN / "kubectl-gpu"), "--kubeconfig", str(cluster.kubeconfig), "mig", "apply",
               "-f", str(mig_file(directory)), "-c", CONFIG, "--all", "--drain",
               "--max-unavailable", str(result.max_unavailable), "--timeout", "30m",
               "-o", "json"]  # fmt: skip
    began = time.monotonic()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as process:  # fmt: skip
        assert process.stdout is not None and process.stderr is not None
        out: list[str] = []
        reader = threading.Thread(target=lambda: out.append(process.stdout.read()))  # type: ignore[union-attr]
        reader.start()
        for line in process.stderr:
            result.lines.append((time.monotonic() - began, line.rstrip("\n")))
        reader.join()
    result.wall_s, result.exit = time.monotonic() - began, process.returncode
    try:
        result.rows = json.loads(out[0])["nodes"]
    except (ValueError, KeyError, IndexError):
        result.rows = []


def agent_logs(cluster: Any, nodes: set[str], lines: int = 6) -> dict[str, str]:
    """The end of the agent's log on each of `nodes` (what it said about the change)."""
    found = {}
    for pod in cluster.store.list("pods", keys.NAMESPACE):
        node, name = pod["spec"].get("nodeName"), pod["metadata"]["name"]
        if node in nodes:
            text = "".join(
                t for (_, p, _, previous), t in cluster.logs.texts().items()
                if p == name and not previous
            )  # fmt: skip
            found[node] = "\n".join(text.splitlines()[-lines:])
    return found


def measure(nodes: int, gpus: int, max_unavailable: int) -> Result:
    from tests.kit.cluster import NodeSpec, SimCluster
    from tests.kit.kube import layouts

    result = Result(nodes, gpus, max_unavailable)
    names = [f"gpu-{i:04d}" for i in range(nodes)]
    with tempfile.TemporaryDirectory(prefix="kgb-drain-") as tmp:
        directory = Path(tmp)
        began = time.monotonic()
        cluster = SimCluster(
            [NodeSpec(n, MODEL, gpus) for n in names],
            layouts.helm(env={"MIG_STRATEGY": "mixed"}),
            agents=True, agent_interval=1.0, kubeconfig=directory / "kubeconfig",
        )  # fmt: skip
        try:
            cluster.start(timeout=120 + 6.0 * nodes)
            result.version = cluster.plane.server_version()
            install_agents(cluster, names)
            workloads(cluster, names, gpus)
            result.setup_s = time.monotonic() - began
            result.rss_mib = processes.rss_by_program()
            offset = cluster.plane.audit_log.stat().st_size
            apply(cluster, result, directory)
            ended = time.monotonic()

            def ends() -> list[NodeEnd]:
                return [node_end(n) for n in cluster.store.list("nodes")]

            applied = {r.get("node") for r in result.rows if r.get("result") == "success"}

            def allocatable() -> bool:  # NVIDIA's plugin re-enumerates after the change
                return all(e.done(gpus) for e in ends() if e.name in applied)

            try:
                _wait("every applied node's MIG allocatable", allocatable, 120)
            except RuntimeError:
                pass  # reported below, node by node
            result.allocatable_after_s = time.monotonic() - ended
            result.ends = ends()
            count(result, _audit_since(cluster.plane, offset))
            wrong = {e.name for e in result.ends if not e.done(gpus)}
            result.agent_logs = agent_logs(cluster, wrong)
            pods = cluster.store.list("pods", "default")
            result.replacements_pending = sum(
                1 for p in pods if (p.get("status") or {}).get("phase") == "Pending"
            )
        finally:
            cluster.stop()
    return result


def report(r: Result) -> None:
    n = r.nodes
    done = [e for e in r.ends if e.done(r.gpus)]
    batches = [(t, line) for t, line in r.lines if line.startswith("batch ")]
    evicted, refused = r.evictions.get(201, 0), r.evictions.get(429, 0)
    print(f"kubectl gpu mig apply --drain --max-unavailable {r.max_unavailable} on {n} nodes of "
          f"{r.gpus} x {MODEL} (kube-apiserver {r.version}; set-up {r.setup_s:.0f} s); "
          f"{machine.load()}")  # fmt: skip
    print(f"  exit {r.exit}, {r.wall_s:.1f} s wall = {r.wall_s / n:.2f} s per node; "
          f"rows: {dict(collections.Counter(row.get('result') for row in r.rows))}")  # fmt: skip
    print(
        f"  evictions: {evicted} answered 201, {refused} answered 429 (budget); "
        f"{r.gpus * n} pods hit; {r.replacements_pending} replacements Pending after"
    )
    print(
        f"  the command's requests: {r.requests} = {r.requests / n:.1f} per node; LISTs of "
        "pods: " + (", ".join(f"{v} {k}" for k, v in sorted(r.pod_lists.items())) or "none")
    )
    print("    " + ", ".join(f"{v} {k}" for k, v in r.calls.most_common()))
    agents = sum(r.agent_calls.values())
    print(
        f"  the agents' requests meanwhile: {agents} = {agents / n:.1f} per node: "
        + ", ".join(f"{v} {k}" for k, v in r.agent_calls.most_common(8))
    )
    print(f"  final state: {len(done)} of {n} nodes applied, uncordoned, no drain record and "
          f"allocatable {PER_GPU} x {r.gpus} (all right {r.allocatable_after_s:.1f} s after "
          "the command ended)")  # fmt: skip
    reasons = {row.get("node"): row.get("reason") for row in r.rows}
    for e in r.ends:
        if not e.done(r.gpus):
            print(f"    NOT DONE {e}; the command's reason: {reasons.get(e.name)}")
            for line in r.agent_logs.get(e.name, "").splitlines():
                print(f"      agent: {line}")
    for e in r.ends[:3]:
        print(f"    {e.name}: state {e.state}, cordoned {e.cordoned}, {e.allocatable}")
    node_mib = sum(v for k, v in r.rss_mib.items() if k in processes.NODE_PROGRAMS)
    print(
        f"  memory of the node side: {node_mib:.0f} MiB = {node_mib / n:.0f} MiB per node ("
        + ", ".join(f"{k} {v:.0f}" for k, v in sorted(r.rss_mib.items()))
        + " MiB)"
    )
    print(f"  progress: {len(r.lines)} lines on stderr, {len(batches)} of batches:")
    for t, line in batches[:3] + [(0.0, "...")] + batches[-3:]:
        print(f"    {t:7.1f}  {line}")
    ends = [t for t, line in batches if " ended: " in line]
    if ends:
        first = batches[0][0]
        per = (ends[-1] - first) / len(ends)
        print(f"  start-up {first:.1f} s; {len(ends)} batches in {ends[-1] - first:.1f} s "
              f"({per:.1f} s each); at 1,000 nodes in the same batches: "
              f"{first + per * 1000 / r.max_unavailable:.0f} s (extrapolated)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--gpus", type=int, default=2, help="GPUs per node (one pod on each)")
    parser.add_argument("--max-unavailable", type=int, default=5)
    options = parser.parse_args()
    print(f"machine: {machine.describe()}; {machine.load()}", flush=True)
    report(measure(options.nodes, options.gpus, options.max_unavailable))


if __name__ == "__main__":
    main()
