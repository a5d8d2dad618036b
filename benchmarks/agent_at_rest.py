"""Benchmark (not a test): the node agent at rest — RSS, CPU and API writes with nothing changing.

Budget (docs/architecture.md): at the default interval (10 s) the agent stays within 100 MiB RSS and
2 % of one core, and sends the API server nothing at rest (it learns of changes by watching). The
real `kubectl-gpu-agent` binary loads `libnvidia-ml.so.1`, which this machine lacks, and the NVML
stand-in only works inside the process that installs it; so the agent runs in a child Python
process (this module with `--child`) that installs the NVML stand-in (an L4 ×4 node) and then
calls the agent's own `agent.main` loop. The cluster (a simulated cluster on a real control
plane of its own, tests/kit/plane: Helm layout, time-sliced ×4, pods placed by the real
scheduler) and the kubelet stand-in (checkpoint + PodResources socket) run in this, the parent,
process, so the child's RSS and CPU are the agent's own. After the child's first pass (which
writes its report), the parent samples /proc/<pid>/status (VmRSS, VmHWM) and /proc/<pid>/stat
(utime + stime) over the window and counts the requests, and of them the writes (create,
update, patch, delete), that kube-apiserver's audit log records from the agent's user agent.

Run: `.venv/bin/python -m benchmarks.agent_at_rest [--seconds 60] [--interval 10]`.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.kit.cluster import SimCluster
    from tests.kit.node.kubelet import FakeKubelet

ROOT = Path(__file__).resolve().parent.parent
NODE = "gpu-a"
MODEL = "L4"
GPUS = 4
TIME_SLICED = (
    "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
    "    - name: nvidia.com/gpu\n      replicas: 4\n"
)
WRITES = ("CREATE", "UPDATE", "PATCH", "DELETE", "DELETECOLLECTION")  # audit verbs, upper-cased


@dataclasses.dataclass(frozen=True)
class AtRest:
    """What the agent did over the window."""

    seconds: float
    interval: float
    rss_mib: float  # at the end of the window
    peak_rss_mib: float  # VmHWM: the process's high-water mark, first pass included
    cpu_percent: float  # of one core, over the window
    writes: int  # API write requests during the window
    first_pass_writes: int
    requests: int  # every API request during the window (watches opened included)


def _child(kubelet_root: Path, interval: float, ready: Path) -> None:
    """The real agent loop (`agent.main`) with the NVML stand-in installed (in the child)."""
    from kubectl_gpu import agent
    from tests.kit.node import libnvml

    libnvml.install(libnvml.FakeLibNvml([MODEL] * GPUS))
    argv = ["--node-name", NODE, "--kubelet-root", str(kubelet_root), "--timeout", "30"]
    sys.exit(agent.main([*argv, "--interval", str(interval), "--heartbeat", str(ready)]))


def _cluster(kubelet_root: Path) -> tuple[SimCluster, FakeKubelet]:
    """The simulated cluster with the node's pods, and the kubelet stand-in serving them."""
    from tests.gpumap.test_report_crd_matches_the_schema import crd
    from tests.kit.cluster import NodeSpec, SimCluster
    from tests.kit.node.kubelet import FakeKubelet
    from tests.kit.plane.plane import wait_for

    sim = SimCluster(
        [NodeSpec(NODE, MODEL, GPUS)],
        layout="helm",
        configs={"ts": TIME_SLICED},
        default_config="ts",
        kubeconfig=kubelet_root.parent / "kubeconfig",
    )
    sim.start()
    document = crd()
    sim.store.create(document)
    reports = f"/apis/{document['spec']['group']}/{document['spec']['versions'][0]['name']}"
    wait_for("the GPUNodeReport CRD to be served", lambda: _served(sim, reports))
    sim.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    # the server admits a pod once the controller-manager has made its namespace's account
    wait_for("ml's default ServiceAccount", lambda: sim.store.list("serviceaccounts", "ml"))
    for i in range(GPUS * 4):
        sim.store.create(_gpu_pod(f"train-{i:02d}"))
    sim.settle(30.0)
    kubelet = FakeKubelet(kubelet_root)
    kubelet.start()
    pods, allocatable = sim.podresources(NODE)
    kubelet.set_pods(pods)
    kubelet.set_allocatable(allocatable)
    kubelet.write_checkpoint("current")
    return sim, kubelet


def _served(sim: SimCluster, path: str) -> bool:
    try:
        sim.store.request("GET", path)
    except Exception:  # noqa: BLE001 - not yet
        return False
    return True


def _gpu_pod(name: str) -> dict[str, object]:
    container = {
        "name": "cuda",
        "image": "cuda:12",
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"containers": [container]},
    }


def _proc(pid: int) -> tuple[float, float, float]:
    """(VmRSS MiB, VmHWM MiB, CPU seconds) of a live process."""
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    kib = {line.split(":")[0]: int(line.split()[1]) for line in status if line.startswith("Vm")}
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return kib["VmRSS"] / 1024, kib["VmHWM"] / 1024, cpu


def _requests(sim: SimCluster) -> list[str]:
    """`VERB uri` of every request the agent sent so far (by its user agent)."""
    from kubectl_gpu import agent

    assert sim.plane is not None
    return sim.plane.requests(agent.user_agent(NODE))


def _writes(sim: SimCluster) -> int:
    return sum(1 for r in _requests(sim) if r.split(" ", 1)[0] in WRITES)


def _wait_ready(child: subprocess.Popen[bytes], ready: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready.exists():
        if child.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the agent never finished its first pass (exit {child.poll()})")
        time.sleep(0.1)


def measure(seconds: float = 60.0, interval: float = 10.0) -> AtRest:
    """Start the cluster, the kubelet and the agent; sample the agent over `seconds` at rest."""
    with tempfile.TemporaryDirectory(prefix="kgb-") as tmp:
        root, ready = Path(tmp) / "kubelet", Path(tmp) / "ready"
        sim, kubelet = _cluster(root)
        try:
            return _observe(sim, root, ready, seconds, interval)
        finally:
            kubelet.stop()
            sim.stop()


def _observe(sim: SimCluster, root: Path, ready: Path, seconds: float, interval: float) -> AtRest:
    kubeconfig = sim.kubeconfig
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "benchmarks.agent_at_rest", "--child", str(root)]
    argv += ["--interval", str(interval), "--ready", str(ready)]
    child = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)  # noqa: S603
    try:
        _wait_ready(child, ready)
        time.sleep(2 * interval)  # the pass its own first writes wake, then rest
        first, before = _writes(sim), len(_requests(sim))
        _rss, _peak, cpu0 = _proc(child.pid)
        started = time.monotonic()
        time.sleep(seconds)
        rss, peak, cpu1 = _proc(child.pid)
        elapsed = time.monotonic() - started
        writes = _writes(sim) - first
        requests = len(_requests(sim)) - before
    finally:
        child.terminate()
        child.wait(10)
    return AtRest(
        elapsed, interval, rss, peak, 100 * (cpu1 - cpu0) / elapsed, writes, first, requests
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="the window at rest")
    parser.add_argument("--interval", type=float, default=10.0, help="the agent's poll interval")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--ready", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        _child(options.child, options.interval, options.ready)
        return
    result = measure(options.seconds, options.interval)
    print(
        f"agent at rest over {result.seconds:.0f} s (interval {result.interval:g} s, "
        f"{result.requests} API requests): RSS {result.rss_mib:.1f} MiB "
        f"(peak {result.peak_rss_mib:.1f}), "
        f"CPU {result.cpu_percent:.2f} % of a core, API writes {result.writes} "
        f"(first pass: {result.first_pass_writes}); budgets 100 MiB, 2 %, 0 requests"
    )


if __name__ == "__main__":
    main()
