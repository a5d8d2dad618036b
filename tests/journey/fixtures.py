"""The real `kubectl` with our console script on PATH, as krew or pip puts it there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.kit.cluster import SimCluster

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def kubectl(tmp_path: Path) -> Callable[[SimCluster], Kubectl]:
    """`kubectl(cluster)` → run(*args, stdin=None, timeout=60): the real kubectl against it,
    of the server's own release where the cluster runs on the real control plane."""
    found = shutil.which("kubectl")

    def against(cluster: SimCluster) -> Kubectl:
        binary = str(cluster.plane.kubectl) if cluster.plane is not None else found
        if binary is None:
            if os.environ.get("KUBECTL_GPU_REQUIRE_KUBECTL"):
                pytest.fail("kubectl is required (KUBECTL_GPU_REQUIRE_KUBECTL) but not on PATH")
            pytest.skip("no kubectl binary on PATH")
        env = environment(cluster, tmp_path)

        def run(*args: str, stdin: str | None = None, timeout: float = 60) -> Any:
            return subprocess.run(
                [binary, *args], input=stdin, capture_output=True, text=True, env=env,
                timeout=timeout, check=False,
            )  # fmt: skip

        return run

    return against


def environment(cluster: SimCluster, tmp_path: Path) -> dict[str, str]:
    """kubectl's environment: a private HOME, the cluster's kubeconfig, our script on PATH."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
    env.update(
        HOME=str(home),
        KUBECONFIG=str(cluster.kubeconfig),
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
    )
    return env
