"""Peak memory of commands that meet an oversized answer or input (docs/performance.md).

Budget (docs/architecture.md): peak <= 400 MiB for any answer size. Cases, each a fresh
`kubectl-gpu` process whose peak RSS comes from its rusage:

- a node list the server does not page: a real kube-apiserver (tests/kit/plane) behind the
  fault proxy, which answers every `GET /api/v1/nodes` with N nodes of about 14 KB each and no
  `continue` (5,000 nodes: 69 MB), as a proxy that drops `limit` would; `map`, `doctor`,
  `share --replicas 2 --dry-run=server`, `mig status`;
- a 4 MiB YAML file of two million values (a flow list of device indexes): `mig plan` and
  `validate`.

Run: .venv/bin/python -m benchmarks.answer_memory [--nodes 5000]
(with the control plane's binaries on PATH, as the Makefile puts them). Never imported by
tests; asserts nothing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.cli.test_an_unpaged_list_is_refused_naming_its_size import unpaged
from tests.kit.plane.faults import Fault, FaultProxy

BIN = Path(sys.executable).parent
_MEASURE = """
import resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], capture_output=True, text=True, check=False)
used = resource.getrusage(resource.RUSAGE_CHILDREN)
last = (done.stderr.strip().splitlines() or [""])[-1 if done.returncode == 0 else 0]
print(time.perf_counter() - start, used.ru_maxrss, done.returncode, last[:90])
"""
COMMANDS = [
    ["map"],
    ["doctor"],
    ["share", "--replicas", "2", "--dry-run=server"],
    ["mig", "status"],
]


def measure(argv: list[str]) -> str:
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, *argv], capture_output=True, text=True, check=True
    ).stdout
    wall, peak, code, said = out.rstrip("\n").split(" ", 3)
    return f"{float(wall):7.1f} {int(peak) / 1024:9.0f} {code:>4}  {said}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    args = parser.parse_args()
    print(f"{'case':48} {'wall s':>7} {'peak MiB':>9} {'exit':>4}  first line")
    with tempfile.TemporaryDirectory() as tmp:
        flow = Path(tmp) / "flow.yaml"
        values = ",".join(["0"] * ((4 * 1024 * 1024 - 4096) // 2))
        flow.write_text(f"version: v1\nmig-configs:\n  c:\n  - devices: [{values}]\n")
        for command in (["mig", "plan", "--gpu", "H100-80GB"], ["validate"]):
            row = measure([str(BIN / "kubectl-gpu"), *command, "-f", str(flow)])
            print(f"{'4 MiB YAML: ' + ' '.join(command[:2]):48} {row}")
        _unpaged_lists(Path(tmp), args.nodes)


def _unpaged_lists(tmp: Path, nodes: int) -> None:
    from tests.kit.plane.plane import ControlPlane

    plane = ControlPlane(controllers=False, scheduler=False, audit=False).start(timeout=180)
    try:
        assert plane.creds is not None
        proxy = FaultProxy.in_front_of(plane).start()
        kubeconfig = proxy.kubeconfig(tmp / "kubeconfig", plane.creds.admin_token)
        # the bundle's objects, so that `share` finds a device plugin to configure
        subprocess.run([str(BIN / "kubectl-gpu"), "install", "--kubeconfig", str(kubeconfig)],
                       capture_output=True, check=False)  # fmt: skip
        size = len(unpaged(nodes)(b'{"items": []}')) / 1e6
        for command in COMMANDS:
            proxy.clear()
            proxy.add(Fault("GET", "/api/v1/nodes", rewrite=unpaged(nodes), times=100))
            row = measure([str(BIN / "kubectl-gpu"), *command, "--kubeconfig", str(kubeconfig)])
            print(f"{f'{size:.0f} MB unpaged node list: ' + ' '.join(command[:2]):48} {row}")
        proxy.stop()
    finally:
        plane.stop()


if __name__ == "__main__":
    main()
