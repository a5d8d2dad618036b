"""`python -m tests.fakes.apiserver --kubeconfig PATH [--nodes N]`: a stand-in for demos.

Owns only the command line: start a `FakeApiServer`, write its kubeconfig, optionally seed
N sample GPU nodes, serve until Ctrl-C. Must not be used by tests (they use the fixtures).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from tests.fakes.apiserver.samples import node
from tests.fakes.apiserver.server import FakeApiServer


def main() -> None:
    parser = argparse.ArgumentParser(description="Run the API server stand-in until Ctrl-C.")
    parser.add_argument("--kubeconfig", type=Path, required=True, help="where to write it")
    parser.add_argument("--nodes", type=int, default=0, help="sample GPU nodes to create")
    options = parser.parse_args()
    with FakeApiServer() as server:
        for index in range(options.nodes):
            server.store.create(
                node(f"gpu-node-{index}", labels={"nvidia.com/gpu.present": "true"})
            )
        server.write_kubeconfig(options.kubeconfig)
        print(f"serving {server.url}; kubeconfig at {options.kubeconfig}", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
