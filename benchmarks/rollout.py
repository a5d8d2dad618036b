"""Benchmark (not a test): `kubectl gpu share` rolling the device plugin across a fleet of KWOK
nodes on the real kube-apiserver, in `--max-unavailable` batches, against Kubernetes' own
rollout of the same DaemonSets on the same server.

The plane runs the controller-manager (its DaemonSet controller recreates each deleted plugin
pod; node-lifecycle-controller off, as KWOK's leases last an hour, and a client rate of 200/s
instead of 20) and the scheduler (which binds the DaemonSet's pods); KWOK runs them. The
device plugin is installed as its Helm chart lays it out (plugin and GFD DaemonSets, the config
ConfigMap; tests/kit/kube/layouts.helm), on N GPU nodes of benchmarks.synthetic's mix.
`share --replicas 4 --max-unavailable M` then rewrites the config and restarts the plugin (and
GFD beside it) on every node, a batch at a time, waiting for each new pod to be Ready. Measured:
wall time, the requests the command made as the server's audit log names them (by verb and
resource, per node; LISTs of pods scoped to one node and DaemonSet-wide) and its progress output
(lines, a sample, and the lines saying which batch of how many runs and what it waits for).
No `--wait`: KWOK nodes have no device plugin to raise their allocatable.

The baseline, first on the same plane and nodes: what a platform engineer does without us —
both DaemonSets given the same `maxUnavailable`, `kubectl rollout restart` of the two, and
`kubectl rollout status` of each to the end. Printed side by side with the ratio share/native.

Each phase's plugin pod restarts are also cut into legs (benchmarks.podlegs: marked for
deletion → created → bound → Ready), to see where one rollout is slower than the other.

Run: `.venv/bin/python -m benchmarks.rollout [--nodes 1000] [--max-unavailable 100] [--rounds 3]`
(`--rounds N`: the two take turns N times, each share changing the replicas again, and the
medians are compared).
"""

from __future__ import annotations

import argparse
import collections
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import machine, podlegs, populate, processes, synthetic
from kubectl_gpu import cluster
from tests.kit.kube import layouts

BIN = Path(sys.executable).parent
RESOURCES = {"Namespace": "namespaces", "ServiceAccount": "serviceaccounts",
             "ConfigMap": "configmaps", "DaemonSet": "daemonsets", "ClusterRole": "clusterroles",
             "ClusterRoleBinding": "clusterrolebindings"}  # fmt: skip


def rollout_plane() -> Any:
    return populate.fleet_plane(
        controllers=True,
        scheduler=True,
        audit=True,
        controller_manager_args=[
            "--controllers", "*,-node-lifecycle-controller",
            "--kube-api-qps", "200", "--kube-api-burst", "400",
        ],
    )  # fmt: skip


def install(plane: Any, nodes: int) -> layouts.Layout:
    writer = populate.Writer(plane)

    def node(index: int) -> int:
        obj = synthetic.node_object(index, synthetic.kind_of(index, nodes))
        for key in ("uid", "resourceVersion", "creationTimestamp"):
            obj["metadata"].pop(key, None)
        writer.create(cluster.path("nodes"), obj)
        # the not-ready taint the API server gives a new Node, which the node-lifecycle
        # controller (off here) takes away once the Node is Ready
        untaint = b'{"spec":{"taints":null}}'
        writer.send("PATCH", cluster.path("nodes", obj["metadata"]["name"]), untaint,
                    "application/merge-patch+json")  # fmt: skip
        return 1

    populate.run_all_of(range(nodes), node)
    layout = layouts.helm({"default": synthetic.TIME_SLICED}, "default")
    for obj in layout.objects:  # after the nodes: the DaemonSets start with every node there
        namespace = obj["metadata"].get("namespace")
        writer.create(cluster.path(RESOURCES[obj["kind"]], namespace=namespace), obj)
    return layout


def ready(plane: Any, layout: layouts.Layout, nodes: int, timeout: float = 1800) -> float:
    """Seconds until both DaemonSets have a Ready pod on every node."""
    writer = populate.Writer(plane)
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        listed = writer.get(cluster.path("daemonsets", namespace=layout.namespace))["items"]
        if all((d.get("status") or {}).get("numberReady") == nodes for d in listed):
            return time.monotonic() - started
        time.sleep(2)
    raise RuntimeError("the device plugin DaemonSets never became Ready on every node")


def native_rollout(plane: Any, layout: layouts.Layout, max_unavailable: int) -> float:
    """Seconds for Kubernetes' own rolling update of the plugin and GFD DaemonSets."""
    names = [o["metadata"]["name"] for o in layout.objects if o["kind"] == "DaemonSet"]
    kubectl = ["kubectl", "--kubeconfig", str(plane.kubeconfig), "-n", layout.namespace]
    strategy = json.dumps(
        {
            "spec": {
                "updateStrategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": max_unavailable},
                }
            }
        }
    )
    for name in names:
        subprocess.run([*kubectl, "patch", "daemonset", name, "--type", "merge", "-p", strategy],
                       check=True, capture_output=True)  # fmt: skip
    for name in names:  # the patch itself rolls nothing, but wait until the controller saw it
        subprocess.run([*kubectl, "rollout", "status", f"daemonset/{name}", "--timeout", "30m"],
                       check=True, capture_output=True)  # fmt: skip
    began = time.monotonic()
    subprocess.run([*kubectl, "rollout", "restart", *(f"daemonset/{n}" for n in names)],
                   check=True, capture_output=True)  # fmt: skip
    for name in names:
        subprocess.run([*kubectl, "rollout", "status", f"daemonset/{name}", "--timeout", "30m"],
                       check=True, capture_output=True)  # fmt: skip
    return time.monotonic() - began


def _ours(line: str) -> dict[str, Any] | None:
    """An audit event of a request kubectl-gpu made (the Python client's user agent)."""
    if "OpenAPI-Generator" not in line and "kubectl-gpu/" not in line:
        return None
    event: dict[str, Any] = json.loads(line)
    return event if event.get("stage") == "RequestReceived" else None


def requests_since(plane: Any, offset: int) -> list[dict[str, Any]]:
    if plane.audit_log.stat().st_size < offset:  # rotated: the count would be silently short
        raise RuntimeError(f"{plane.audit_log} was rotated during the run; nothing to count")
    with plane.audit_log.open() as log:
        log.seek(offset)
        return [e for e in map(_ours, log) if e]


def _children_cpu() -> float:
    """User and system CPU seconds of the child processes waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(
    nodes: int, max_unavailable: int, profile: Path | None = None, nice: int = 0, rounds: int = 1
) -> dict[str, Any]:
    """Both rollouts on one plane, taking turns `rounds` times (native, share, native, share…):
    on this machine one phase's pod restarts can run 30 % slower than the next one's whoever
    deletes the pods, so a single pair can show a gap that is the machine's, not share's."""
    result: dict[str, Any] = {"nodes": nodes, "max_unavailable": max_unavailable}
    plane = rollout_plane()
    plane.start(timeout=180)
    try:
        started = time.monotonic()
        layout = install(plane, nodes)
        result["ready_s"] = ready(plane, layout, nodes) + (time.monotonic() - started)
        result["version"] = plane.server_version()
        plugin = str(layout.plugin_daemonset)
        result["natives"], result["shares"] = [], []
        for turn in range(rounds):
            timeline = podlegs.PodTimeline(plane, layout.namespace).start()
            plane_cpu, kubectl_cpu = processes.cpu_by_program(), _children_cpu()
            began = time.monotonic()
            wall = native_rollout(plane, layout, max_unavailable)
            legs = timeline.legs(plugin, began, time.monotonic())
            cpu = processes.cpu_spent(plane_cpu, processes.cpu_by_program())
            cpu["kubectl"] = _children_cpu() - kubectl_cpu
            result["natives"].append({"wall_s": wall, "legs": legs, "plane_cpu": cpu})
            # every turn changes the config, so that share restarts every node again
            replicas = 4 if turn % 2 == 0 else 2
            plane_cpu = processes.cpu_by_program()
            shared = share(plane, max_unavailable, replicas, profile if turn == 0 else None, nice)
            shared["legs"] = timeline.legs(plugin, shared.pop("began"), time.monotonic())
            shared["plane_cpu"] = processes.cpu_spent(plane_cpu, processes.cpu_by_program())
            shared["plane_cpu"]["kubectl-gpu"] = shared["cpu_s"]
            timeline.stop()
            result["shares"].append(shared)
    finally:
        plane.stop()
    return result


def share(
    plane: Any, max_unavailable: int, replicas: int, profile: Path | None, nice: int
) -> dict[str, Any]:
    """One `kubectl gpu share --replicas N` across the fleet: its wall and CPU seconds, its
    output lines with when each came, and its requests from the audit log."""
    offset = plane.audit_log.stat().st_size
    # with --profile, share runs under cProfile (its start-up and its rollout loop)
    prefix = [sys.executable, "-m", "cProfile", "-o", str(profile)] if profile else []
    # with --nice, share yields the CPU to the plane it shares the machine with (an
    # experiment: is share slower because the plane here runs on the same two cores?)
    prefix = ["nice", "-n", str(nice), *prefix] if nice else prefix
    command = [*prefix, str(BIN / "kubectl-gpu"), "--kubeconfig", str(plane.kubeconfig),
               "share", "--replicas", str(replicas), "--max-unavailable", str(max_unavailable),
               "--timeout", "30m"]  # fmt: skip
    began, cpu = time.monotonic(), _children_cpu()
    lines: list[tuple[float, str]] = []  # when each line of its output came
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as process:  # fmt: skip
        assert process.stdout is not None
        for line in process.stdout:
            lines.append((time.monotonic() - began, line.rstrip("\n")))
    result: dict[str, Any] = {"began": began, "wall_s": time.monotonic() - began}
    # its own CPU seconds: on 2 cores it competes with the plane that recreates the pods
    result["cpu_s"] = _children_cpu() - cpu
    result["exit"] = process.returncode
    result["lines"] = lines
    calls: collections.Counter[str] = collections.Counter()
    pod_lists: collections.Counter[str] = collections.Counter()
    for e in requests_since(plane, offset):
        ref = e.get("objectRef") or {}
        calls[f"{e['verb']} {ref.get('resource', '')}"] += 1
        if e["verb"] == "list" and ref.get("resource") == "pods":
            scoped = "spec.nodeName" in e.get("requestURI", "")
            pod_lists["one node" if scoped else "namespace-wide"] += 1
    result["calls"], result["pod_lists"] = calls, pod_lists
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--max-unavailable", type=int, default=100)
    parser.add_argument("--profile", type=Path, help="write share's cProfile statistics here")
    parser.add_argument("--nice", type=int, default=0, help="run share at this niceness")
    parser.add_argument("--rounds", type=int, default=1, help="native and share taking turns")
    options = parser.parse_args()
    print(f"machine: {machine.describe()}; {machine.load()}", flush=True)
    r = measure(options.nodes, options.max_unavailable, options.profile, options.nice,
                options.rounds)  # fmt: skip
    report(r)


def report(r: dict[str, Any]) -> None:
    n, natives, shares = r["nodes"], r["natives"], r["shares"]
    print(
        f"kubectl gpu share --max-unavailable {r['max_unavailable']} on {n} KWOK nodes "
        f"(kube-apiserver {r['version']}, plugin Ready everywhere after {r['ready_s']:.0f} s); "
        f"{machine.load()}"
    )
    for turn, (native, shared) in enumerate(zip(natives, shares, strict=True), 1):
        print(
            f"  round {turn}: native rollout (kubectl rollout restart + status, maxUnavailable "
            f"{r['max_unavailable']}) {native['wall_s']:.1f} s; share "
            f"{shared['wall_s']:.1f} s, exit {shared['exit']}; ratio "
            f"{shared['wall_s'] / native['wall_s']:.2f}; share's own CPU {shared['cpu_s']:.1f} s"
        )
    native_s = statistics.median(x["wall_s"] for x in natives)
    share_s = statistics.median(x["wall_s"] for x in shares)
    print(f"  median of {len(natives)}: native {native_s:.1f} s, share {share_s:.1f} s, ratio "
          f"share/native {share_s / native_s:.2f}")  # fmt: skip
    first = shares[0]
    total = sum(first["calls"].values())
    print(
        f"  the first share: {total} requests = {total / n:.1f} per node; LISTs of pods: "
        + ", ".join(f"{v} {k}" for k, v in sorted(first["pod_lists"].items()))
    )
    print("  " + ", ".join(f"{v} {k}" for k, v in first["calls"].most_common()))
    lines = first["lines"]
    during = [t for t, _ in lines if t < first["wall_s"] - 2]
    began = f"the first after {during[0]:.0f} s" if during else "none"
    print(f"  output: {len(lines)} lines; before its last 2 s: {len(during)} ({began}); "
          "first and last, with seconds since the start:")  # fmt: skip
    for t, line in lines[:6] + [(0.0, "...")] + lines[-6:]:
        print(f"    {t:6.1f}  {line}")
    batches = [(t, line) for t, line in lines if line.startswith("batch ")]
    if batches:
        start, last = batches[0][0], max(t for t, line in batches if " ended: " in line)
        print(f"  phases: start-up, reads, checks and writes {start:.1f} s; restarts "
              f"{last - start:.1f} s (native: {natives[0]['wall_s']:.1f} s); report "
              f"{first['wall_s'] - last:.1f} s")  # fmt: skip
    print("  a plugin pod's restart, leg by leg (from a watch of the plugin's pods):")
    for turn, (native, shared) in enumerate(zip(natives, shares, strict=True), 1):
        for phase, legs in (("native", native["legs"]), ("share", shared["legs"])):
            print(f"    round {turn}, {phase}: {legs['restarts']} restarts; "
                  + "; ".join(f"{k}: {v}" for k, v in legs.items() if k != "restarts"))  # fmt: skip
    print("  CPU seconds each program used, by phase (the plane's programs, and the command):")
    for turn, (native, shared) in enumerate(zip(natives, shares, strict=True), 1):
        for phase, cpu in (("native", native["plane_cpu"]), ("share", shared["plane_cpu"])):
            busy = {k: v for k, v in cpu.items() if v >= 0.05}
            print(f"    round {turn}, {phase}: {sum(busy.values()):.1f} s: "
                  + ", ".join(f"{k} {v:.1f}" for k, v in busy.items()))  # fmt: skip
    print(f"  where the rollout stands: {len(batches)} lines of batches; the first and last:")
    for t, line in batches[:4] + [(0.0, "...")] + batches[-3:]:
        print(f"    {t:6.1f}  {line}")


if __name__ == "__main__":
    main()
