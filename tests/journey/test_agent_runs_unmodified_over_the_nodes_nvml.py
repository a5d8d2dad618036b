"""Each GPU node's agent is the installed `kubectl-gpu-agent`, unmodified, with that node's
`libnvidia-ml.so.1` loaded by pynvml's own `CDLL` as on a real node: no wrapper process, nothing
installed into it. What the agent reads through the library is the node's one truth, the same
the simulation's own processes see.

Checked from outside the process, as an operator would on a node: its command line
(/proc/PID/cmdline), the libraries mapped into it (/proc/PID/maps), and what it reports."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import eventually as retried
from tests.journey.fixtures import Kubectl
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(120)]


eventually = functools.partial(retried, timeout=30.0, pause=0.3)


def mapped(pid: int) -> set[str]:
    """The files mapped into process `pid` (its loaded libraries among them)."""
    lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return {line.split(maxsplit=5)[5] for line in lines if len(line.split(maxsplit=5)) == 6}


def test_the_agent_is_the_plain_entry_point_with_the_nodes_library_loaded(
    sim_cluster: MakeSimCluster, kubectl: Callable[[SimCluster], Kubectl]
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "H100-SXM5-80GB", 1)], agents=True)
    k = kubectl(cluster)
    assert k("gpu", "install").returncode == 0
    assert cluster.agents is not None
    pid = eventually(lambda: cluster.agents.pid("gpu-a") if cluster.agents else None)
    assert pid, "no agent process on gpu-a"
    driver = cluster.agents.sides["gpu-a"].driver
    library = str(driver.library.resolve())

    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert any(arg.endswith(b"/kubectl-gpu-agent") for arg in argv), argv
    assert not any(b"tests" in arg for arg in argv), argv  # no wrapper module, no seam
    assert eventually(lambda: library in mapped(pid)), sorted(mapped(pid))
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    assert not any(e.startswith(b"SIM_GPU_STATE=") for e in environ)

    # What the agent reports is what the library serves from the node's state file.
    state = json.loads(driver.state.read_text())

    def reported() -> dict[str, Any] | None:
        got = k("get", "gpunodereports", "-A", "-o", "json")
        items = json.loads(got.stdout)["items"] if got.returncode == 0 else []
        return items[0] if items else None

    report = eventually(reported)
    assert report, "the agent never reported"
    assert state["gpus"][0]["uuid"] in json.dumps(report)
