"""Two `mig apply` on one node at once, through the real kubectl: the first waits (`--wait`)
for the agent, the second asks for another config, or for the same name with other content.
The first used to wait out its whole timeout and then say its request "stays", though it was
overwritten and would never be applied; now it stops at once, says which request replaced it,
and exits 1."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from kubectl_gpu import keys
from tests.agent.fixtures import agent_pod
from tests.journey.fixtures import Kubectl, environment
from tests.kit.cluster import SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import layouts

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(180)]
ALL_3G = [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]
BALANCED = [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 1, "2g.20gb": 1}}]


def mig_file(path: Path, **configs: object) -> str:
    named = {name.replace("_", "-"): specs for name, specs in configs.items()}
    path.write_text(yaml.safe_dump({"version": "v1", "mig-configs": named}))
    return str(path)


def desired(cluster: SimCluster) -> str:
    labels = cluster.client.get("nodes", "gpu-1")["metadata"].get("labels") or {}
    return str(labels.get(keys.MIG_DESIRED_LABEL, ""))


@pytest.mark.parametrize(
    ("second", "named"),
    [
        ({"balanced": BALANCED}, "the node now asks for kubectl-gpu.io/mig.config=balanced"),
        ({"all_3g": BALANCED}, "config all-3g in ConfigMap kubectl-gpu-mig-config now holds "),
    ],
    ids=["another-config", "same-name-other-content"],
)
def test_the_waiting_apply_stops_at_once_naming_the_request_that_replaced_it(
    sim_cluster: MakeSimCluster,
    kubectl: Callable[[SimCluster], Kubectl],
    tmp_path: Path,
    second: dict[str, object],
    named: str,
) -> None:
    cluster = sim_cluster(["gpu-1=A100-SXM4-80GB:1"], layouts.helm(env={"MIG_STRATEGY": "mixed"}))
    agent_pod(cluster, "gpu-1")  # its pod is there; no pass runs, so nothing takes a request
    k = kubectl(cluster)
    first_file = mig_file(tmp_path / "first.yaml", all_3g=ALL_3G)
    assert cluster.plane is not None
    first = subprocess.Popen(
        [str(cluster.plane.kubectl), "gpu", "mig", "apply", "-f", first_file, "-c", "all-3g",
         "--node", "gpu-1", "--wait", "--timeout", "120s"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=environment(cluster, tmp_path),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while desired(cluster) != "all-3g" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert desired(cluster) == "all-3g"

        name = next(iter(second)).replace("_", "-")
        other = k("gpu", "mig", "apply", "-f", mig_file(tmp_path / "second.yaml", **second),
                  "-c", name, "--node", "gpu-1")  # fmt: skip
        assert other.returncode == 0, other.stderr
        asked = time.monotonic()
        out, err = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
        first.communicate()  # reaped, pipes closed

    assert time.monotonic() - asked < 30  # not the 120 s timeout
    assert first.returncode == 1, (out, err)
    assert "another writer replaced this request while it waited" in err
    assert named in err
    assert "will not be applied" in err
    assert "stays" not in err
