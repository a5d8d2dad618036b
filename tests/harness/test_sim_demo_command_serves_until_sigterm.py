"""`python -m tests.kit.cluster --real`, as `make demo` runs it: a cluster on a real control
plane that the server's own kubectl can use (GPU nodes advertising shared GPUs, a DRA node whose
ResourceSlice NVIDIA's own DRA kubelet plugin published, each GPU node in a network namespace of
its own), and a clean stop on SIGTERM that leaves no control-plane process, no NVIDIA process and
no namespace behind; the shared GPUs are what NVIDIA's own device plugin advertised (the
default, as the demo starts it)."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.kit.kube.kubectl import KubectlRunner
from tests.kit.node import sandbox
from tests.kit.plane import netns

pytestmark = pytest.mark.timeout(240)
ROOT = Path(__file__).resolve().parents[2]


def read_line(process: subprocess.Popen[str], timeout: float) -> str:
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            return ""
    return process.stdout.readline()


def stderr_of(process: subprocess.Popen[str]) -> str:
    if process.poll() is None or process.stderr is None:
        return ""
    return process.stderr.read()


def server_processes(url: str) -> list[int]:
    """The kube-apiserver processes listening on `url`'s port (found by their command line)."""
    port = url.rpartition(":")[2]
    found = []
    for entry in Path("/proc").iterdir():
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if args and args[0].endswith(b"kube-apiserver") and port.encode() in args:
            found.append(int(entry.name))
    return found


def node_namespaces() -> set[str]:
    """The name of each simulated node namespace there is now."""
    if netns.unavailable() is not None or not netns.NETNS_DIR.exists():
        return set()
    return {entry.name for entry in netns.NETNS_DIR.glob(f"{netns.PREFIX}*")}


def descendants(root: int) -> dict[int, str]:
    """Every process below `root`, by pid, with the name of its executable."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid in [p for p, pp in parents.items() if pp == parent]:
            try:
                found[pid] = Path(os.readlink(f"/proc/{pid}/exe")).name
            except OSError:
                found[pid] = ""
            frontier.append(pid)
    return found


def node_env(pid: int) -> str:
    """The NODE_NAME=… entry of a process's environment ("" if none or gone)."""
    try:
        entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return ""
    return next((e.decode() for e in entries if e.startswith(b"NODE_NAME=")), "")


@pytest.mark.skipif(sandbox.unavailable() is not None, reason=str(sandbox.unavailable()))
@pytest.mark.skipif(netns.unavailable() is not None, reason=str(netns.unavailable()))
def test_the_demo_cluster_answers_kubectl_and_exits_cleanly_on_sigterm(tmp_path: Path) -> None:
    config = tmp_path / "ts.yaml"
    config.write_text(
        "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
        "    - name: nvidia.com/gpu\n      replicas: 2\n"
    )
    kubeconfig = tmp_path / "kubeconfig"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.kit.cluster",
            "--kubeconfig",
            str(kubeconfig),
            "--layout",
            "helm",
            "--nodes",
            "gpu-a=H100-SXM5-80GB:2,cpu-1=none:0",
            "--config",
            f"ts={config}",
            "--default",
            "ts",
            "--dra-nodes",
            "dra-a=A100-SXM4-80GB:1",
            "--real",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = read_line(process, timeout=150)  # a cold plane takes a while on 2 cores
        assert line.startswith(f"ready: kubeconfig={kubeconfig}"), line + stderr_of(process)
        fields = dict(f.split("=", 1) for f in line.split()[1:])
        kubectl = KubectlRunner(fields["kubectl"], kubeconfig, tmp_path / "kubectl")
        version = json.loads(kubectl("version", "-o", "json").stdout)
        assert version["serverVersion"]["gitVersion"].startswith("v1.3")  # Kubernetes' own
        nodes = kubectl("get", "nodes", "-o", "json")
        assert nodes.returncode == 0, nodes.stderr
        items = {n["metadata"]["name"]: n for n in json.loads(nodes.stdout)["items"]}
        assert sorted(items) == ["cpu-1", "dra-a", "gpu-a"]
        for _ in range(100):  # NVIDIA's process registers once its pod starts: give it a moment
            items = {n["metadata"]["name"]: n for n in json.loads(nodes.stdout)["items"]}
            if items["gpu-a"]["status"].get("allocatable", {}).get("nvidia.com/gpu") == "4":
                break
            time.sleep(0.2)
            nodes = kubectl("get", "nodes", "-o", "json")
        assert items["gpu-a"]["status"]["allocatable"]["nvidia.com/gpu"] == "4"
        running = descendants(process.pid)
        # gpu-a's device plugin (the Helm chart's default affinity would place one on dra-a too:
        # a user of both planes narrows it; the DRA node is NVIDIA's DRA plugin's)
        plugins = [p for p, name in running.items() if name == "nvidia-device-plugin"]
        assert "NODE_NAME=gpu-a" in map(node_env, plugins), running
        dra = [p for p, name in running.items() if name == "gpu-kubelet-plugin"]
        assert [node_env(p) for p in dra] == ["NODE_NAME=dra-a"], running
        slices = json.loads(kubectl("get", "resourceslices", "-o", "json").stdout)["items"]
        assert [s["spec"]["nodeName"] for s in slices] == ["dra-a"]
        apiserver = server_processes(fields["server"])
        assert apiserver, "no kube-apiserver serving the demo's port"
        # the GPU node's own network namespace: named for the demo cluster's slot, which its
        # InternalIP 10.0.<slot>.<node> tells. Other xdist workers' clusters hold other slots
        # while this one runs, and may take this slot (and a freed namespace inode) once it ends.
        address = [a["address"] for a in items["gpu-a"]["status"].get("addresses", [])
                   if a.get("type") == "InternalIP"]  # fmt: skip
        slot = address[0].split(".")[2] if address and address[0].startswith("10.0.") else None
        mine = {
            name for name in node_namespaces()
            if slot is not None and name.startswith(f"{netns.PREFIX}{slot}n")
        }  # fmt: skip
        if netns.unavailable() is None and slot is not None:
            assert len(mine) == 2, mine  # gpu-a's and dra-a's
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert not server_processes(fields["server"]), "the control plane outlived the demo"
        left = mine & node_namespaces()
        assert not left or netns.slot_in_use(int(slot or 0)), (
            f"the demo's node namespace outlived it: {left}"
        )
        assert not [p for p in [*plugins, *dra] if Path(f"/proc/{p}").exists()], (
            "NVIDIA's plugin outlived it"
        )
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=5)
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()
        process.stderr.close()
