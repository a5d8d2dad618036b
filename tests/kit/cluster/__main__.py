"""`python -m tests.kit.cluster --kubeconfig PATH …`: a simulated GPU cluster for demos.

Owns the command line only: build the nodes (`--nodes gpu-a=H100-SXM5-80GB:8,cpu-1=none:0`), the
deployment (`--layout gpu-operator|helm|static|none`) and its configs (`--config KEY=FILE`,
`--default KEY`), GPU nodes served by NVIDIA's DRA driver (`--dra-nodes dra-a=A100-SXM4-80GB:2`),
whether GPU nodes run the real agent once it is installed (`--agents`, the default), each GPU
node's network namespace (`--node-networks`, on where the machine allows it), GPU pods' compute
processes (`--gpu-processes`, on), a dcgm-exporter stand-in (`--dcgm-exporter
copied|per-process`) and the GPU Operator's MIG manager (a stand-in, `--mig-manager`, on for
`--layout gpu-operator`, where the operator renders it unless the ClusterPolicy disables it, so
`kubectl gpu mig apply` succeeds there as on a real operator install), start a `SimCluster` on a
control plane of its own (tests/kit/plane), every GPU node running NVIDIA's own device plugin
v0.19.3 and GFD (with NFD's master) in its sandbox (needs root and util-linux's `unshare`),
write the kubeconfig, print one `ready: kubeconfig=PATH server=URL kubectl=PATH` line (kubectl of
the server's own release), serve until SIGTERM or SIGINT, then stop cleanly and exit 0. Must not be
used by tests in-process (they use the fixture).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from tests.kit.cluster import dranodes
from tests.kit.cluster.cluster import ALL_CONTROLLERS, SimCluster
from tests.kit.kube.layouts import LAYOUTS
from tests.kit.node import sandbox
from tests.kit.node.nodes import NodeSpec
from tests.kit.plane import netns

DEFAULT_NODES = "gpu-a=H100-SXM5-80GB:8,gpu-b=A100-SXM4-80GB:4,cpu-1=none:0"
MAX_CONFIG_BYTES = 1024 * 1024


def _options(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.kit.cluster",
        description="Run a simulated GPU cluster until SIGTERM.",
    )
    parser.add_argument("--kubeconfig", type=Path, required=True, help="where to write it")
    parser.add_argument("--layout", default="gpu-operator", choices=[*LAYOUTS, "none"])
    parser.add_argument("--nodes", default=DEFAULT_NODES, help="NAME=MODEL:COUNT,…")
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=FILE",
        help="a device-plugin config for the ConfigMap (repeatable)",
    )
    parser.add_argument("--default", dest="default_config", help="the default config key")
    parser.add_argument(
        "--agents",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the real kubectl-gpu-agent as a process on every GPU node that gets an agent "
        "pod (after `kubectl gpu install`)",
    )
    parser.add_argument(
        "--dra-nodes",
        default="",
        metavar="NAME=MODEL:COUNT,…",
        help="GPU nodes served by NVIDIA's DRA driver: its kubelet plugin v0.4.1 (built by "
        "scripts/gobins.py) runs in each such node's sandbox and publishes its ResourceSlices "
        "(needs root and util-linux's unshare)",
    )
    parser.add_argument(
        "--node-networks",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="give every GPU node a network namespace of its own, so the API server's pod "
        "proxy reaches its pods (the agent's usage endpoint, dcgm-exporter) (default: on where "
        "this machine allows it: root, iproute2)",
    )
    parser.add_argument(
        "--gpu-processes",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="running GPU pods get compute processes in their node's NVML state and /proc "
        "(memory and SM %% from the pod annotations sim.kubectl-gpu.io/gpu-memory and "
        "sim.kubectl-gpu.io/sm-percent)",
    )
    parser.add_argument(
        "--dcgm-exporter",
        choices=["none", "copied", "per-process"],
        default="none",
        help="run the GPU Operator's dcgm-exporter (a stand-in) on every GPU node: figures "
        "copied to every pod sharing a device, or per process (KUBERNETES_VIRTUAL_GPUS)",
    )
    parser.add_argument(
        "--mig-manager",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run the GPU Operator's MIG manager (a stand-in: NVIDIA's cannot be built here) "
        "on GPU nodes, so `kubectl gpu mig apply` works through the operator "
        "(default: on for --layout gpu-operator)",
    )
    parser.add_argument(
        "--real",
        action="store_true",
        help="accepted as before: the cluster always runs on a real control plane (etcd, "
        "kube-apiserver, controller-manager, scheduler, KWOK)",
    )
    return parser.parse_args(argv)


def _configs(pairs: list[str]) -> dict[str, str] | None:
    configs: dict[str, str] = {}
    for pair in pairs:
        key, sep, path = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"--config wants KEY=FILE, got {pair!r}")
        data = Path(path).read_bytes()
        if len(data) > MAX_CONFIG_BYTES:
            raise SystemExit(f"{path}: larger than a ConfigMap can hold")
        configs[key] = data.decode()
    return configs or None


def main(argv: list[str] | None = None) -> int:
    options = _options(argv)
    nodes = [NodeSpec.parse(item) for item in options.nodes.split(",") if item.strip()]
    try:
        dra_nodes = dranodes.parse(options.dra_nodes)
    except ValueError as error:
        raise SystemExit(str(error)) from None
    layout = None if options.layout == "none" else options.layout
    networks = options.node_networks
    if networks is None:
        networks = netns.unavailable() is None
    elif networks and netns.unavailable():
        raise SystemExit(f"--node-networks: {netns.unavailable()}")
    exporter = None if options.dcgm_exporter == "none" else options.dcgm_exporter
    if exporter and not networks:
        raise SystemExit("--dcgm-exporter serves on pod IPs: it needs --node-networks")
    if sandbox.unavailable():
        raise SystemExit(f"NVIDIA's device plugin runs in a node sandbox: {sandbox.unavailable()}")
    mig_manager = options.mig_manager
    if mig_manager is None:
        mig_manager = layout == "gpu-operator"
    elif mig_manager and layout != "gpu-operator":
        raise SystemExit("--mig-manager: only the GPU Operator runs one (--layout gpu-operator)")
    controllers = (*ALL_CONTROLLERS, "mig-manager") if mig_manager else ALL_CONTROLLERS
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    cluster = SimCluster(
        [*nodes, *dra_nodes],
        layout,
        _configs(options.config),
        options.default_config,
        controllers,
        kubeconfig=options.kubeconfig.resolve(),
        agents=options.agents,
        node_networks=networks,
        gpu_processes=options.gpu_processes,
        dcgm_exporter=exporter,
    )
    try:
        cluster.start()
        line = f"ready: kubeconfig={cluster.kubeconfig} server={cluster.url}"
        sys.stdout.write(f"{line} kubectl={cluster.plane.kubectl}\n")
        sys.stdout.flush()
        stop.wait()
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
