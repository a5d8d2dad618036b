"""Node Feature Discovery's master (v0.19.0, unmodified), one process per simulated cluster.

NVIDIA's GFD (since v0.19.0) does not label the Node itself: it writes a NodeFeature object
(`nfd.k8s-sigs.io/v1alpha1`, `nvidia-features-for-<node>` in its pod's namespace) and NFD's
master turns every NodeFeature into the node's labels (adding new ones, changing and removing
those it wrote before, which it remembers in the Node's `nfd.node.kubernetes.io/feature-labels`
annotation). Here the master is `nfd-master` built from `sigs.k8s.io/node-feature-discovery`
v0.19.0 by `scripts/gobins.py nfd-master`, with NFD's own CRDs (from the same module) served by
the cluster's API server, run with what the NVIDIA device plugin's Helm chart gives its NFD
dependency (`extraLabelNs: [nvidia.com]`) and its metrics/health port on an ephemeral one.

Owns `NfdMaster` (install the CRDs, run the process, keep its log, stop it; the binary is
tests/kit/kube/builds.py's to find). Must not compute labels (NFD's code does) or touch GPU state.
"""

from __future__ import annotations

import copy
import functools
import shutil
import subprocess
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import yaml

from tests.kit.kube import ApiError, builds
from tests.kit.node.stopping import stop_program
from tests.kit.plane.store import ApiStore

PROGRAM = "nfd-master"
CRDS = "nfd-api-crds.yaml"  # NFD's CRDs, copied beside the binary from its module
NODE_FEATURES = "nodefeatures.nfd.k8s-sigs.io"
_LOG_LINES = 200


def crds(binary: Path) -> list[dict[str, Any]]:
    """NFD's CustomResourceDefinitions (NodeFeature, NodeFeatureGroup, NodeFeatureRule)."""
    return copy.deepcopy(_crds(binary))


@functools.cache
def _crds(binary: Path) -> list[dict[str, Any]]:  # read once a session: 0.2 s of YAML
    text = (binary.parent / CRDS).read_text(encoding="utf-8")
    return [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]


class NfdMaster:
    """One `nfd-master` for one simulated cluster, talking to its API server."""

    def __init__(self, store: ApiStore, kubeconfig: Path) -> None:
        self.store = store
        self.kubeconfig = kubeconfig
        self.binary = builds.program(PROGRAM)
        self.log: deque[str] = deque(maxlen=_LOG_LINES)
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self.crd_names: list[str] = []  # what install_crds served

    def install_crds(self, timeout: float = 30.0) -> None:
        """Serve NFD's CRDs (as its Helm chart installs them) and wait until established."""
        served = crds(self.binary)
        names = self.crd_names = [crd["metadata"]["name"] for crd in served]
        for crd in served:
            try:
                self.store.create(crd)
            except ApiError as exc:
                if exc.code != 409:  # already there: a cluster on this plane made it
                    raise
        deadline = time.monotonic() + timeout
        for name in names:
            while not _established(self.store, name):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"CRD {name} was not established in {timeout:.0f} s")
                time.sleep(0.1)

    def start(self, node: str) -> None:
        """Run the master. It names the node it runs on (NODE_NAME): at start it tidies that
        Node's annotations, so the node must exist."""
        argv = [
            str(self.binary), f"-kubeconfig={self.kubeconfig}", "-config=", "-port=0",
            "-extra-label-ns=nvidia.com",
        ]  # fmt: skip
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "NODE_NAME": node}
        setpriv = shutil.which("setpriv")  # it ends with the test that started it
        self._process = subprocess.Popen(  # noqa: S603 (fixed argv, no shell)
            [setpriv, "--pdeathsig", "TERM", "--", *argv] if setpriv else argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, name="nfd-master", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        process = self._process
        assert process is not None and process.stdout is not None
        for line in process.stdout:
            self.log.append(line.rstrip("\n"))
        process.stdout.close()

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def stop(self) -> None:
        if self._process is not None:
            stop_program(self._process, self._reader)
            self._process = None


def _established(store: ApiStore, name: str) -> bool:
    try:
        crd = store.get("customresourcedefinitions", name)
    except ApiError:
        return False
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)
