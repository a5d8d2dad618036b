"""`python -m tests.kit.plane --kubeconfig PATH`: run a real control plane until SIGTERM."""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import threading
from pathlib import Path

from tests.kit.plane.plane import VERSIONS, ControlPlane, chosen_version


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--version", default=chosen_version(), choices=sorted(VERSIONS))
    args = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with ControlPlane(args.version) as plane:
        shutil.copyfile(plane.kubeconfig, args.kubeconfig)
        print(f"ready: {plane.url} Kubernetes {plane.server_version()}", flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
