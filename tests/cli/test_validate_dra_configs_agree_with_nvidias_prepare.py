"""`kubectl gpu validate` on DRA claims says what NVIDIA's own DRA kubelet plugin (v0.4.1, on a
simulated DRA node) then does with them: a claim validate passes is prepared; a config validate
refuses (a misspelt field, which the driver decodes strictly) is refused by NVIDIA's
NodePrepareResources, which is where a user would meet it (the pod stays in ContainerCreating);
the error validate's warning quotes for time-slicing (whose feature gate is off by default) is
NVIDIA's word for word. The real scheduler allocates each claim first."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import CliResult
from tests.kit.cluster import NodeSpec
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.node import sandbox

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(sandbox.unavailable() is not None, reason=str(sandbox.unavailable())),
]
Run = Callable[..., CliResult]
Obj = dict[str, Any]


def claim(name: str, parameters: Obj | None) -> Obj:
    spec: Obj = {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}
    if parameters is not None:
        spec["config"] = [{"opaque": {"driver": "gpu.nvidia.com", "parameters": parameters}}]
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"devices": spec},
    }  # fmt: skip


def gpu_config(sharing: Obj, field: str = "sharing") -> Obj:
    return {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", field: sharing}


CLAIMS = {
    "plain": claim("plain", None),
    "misspelt": claim("misspelt", gpu_config({"strategy": "TimeSlicing"}, field="sharng")),
    "time-sliced": claim(
        "time-sliced",
        gpu_config({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}),
    ),
}


def test_what_validate_refuses_nvidias_plugin_refuses_at_prepare(
    sim_cluster: MakeSimCluster, run_cli: Run, tmp_path: Path
) -> None:
    cluster = sim_cluster([NodeSpec("dra-1", "A100-SXM4-80GB", 3, dra=True)])
    verdicts = {}
    for name, obj in CLAIMS.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(obj))
        result = run_cli("validate", "-f", str(path))
        verdicts[name] = (result.exit_code, result.stdout + result.stderr)
        cluster.client.create(obj)
        cluster.client.create({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
                     "containers": [{"name": "main", "image": "cuda:12",
                                     "resources": {"claims": [{"name": "gpu"}]}}]},
        })  # fmt: skip
    cluster.settle(60)
    assert cluster.dra_kubelet is not None
    uids = {n: cluster.client.get("pods", n, "default")["metadata"]["uid"] for n in CLAIMS}
    prepared = {n for n, uid in uids.items() if cluster.dra_kubelet.claims_of(uid)}
    refused = {n: cluster.dra_kubelet.errors.get(uid, "") for n, uid in uids.items()}

    assert verdicts["plain"][0] == 0, verdicts["plain"][1]
    assert prepared == {"plain"}, refused
    assert verdicts["misspelt"][0] == 1 and "sharng" in verdicts["misspelt"][1]
    assert "sharng" in refused["misspelt"]  # NVIDIA's strict decoding names the same field
    # validate cannot see the driver's gates: a warning quoting the driver's error, which
    # NVIDIA's plugin (gates at their defaults) then gives word for word
    code, text = verdicts["time-sliced"]
    assert code == 0 and "[dra.feature-gate]" in text, text
    quoted = text.split("NodePrepareResources fails: ", 1)[1].split(" [dra.feature-gate]")[0]
    assert quoted in refused["time-sliced"], (quoted, refused["time-sliced"])
