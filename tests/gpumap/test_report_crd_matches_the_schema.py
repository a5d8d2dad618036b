"""The GPUNodeReport CRD shipped as package data is a valid apiextensions.k8s.io/v1 definition,
its openAPIV3Schema says what schemas/node-report.v1.json says, and the real kube-apiserver
takes it (it refuses a schema that is not structural), serves the custom resource (the real
kubectl finds it by its plural), and holds reports to it: one the agent builds is admitted,
one that breaks the schema is refused field by field, and a field the schema lacks is dropped."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from importlib import resources
from typing import Any

import pytest
import yaml

from kubectl_gpu import cluster
from kubectl_gpu.errors import ClusterError
from kubectl_gpu.gpumap import join, report
from kubectl_gpu.gpumap.allocations import Allocation, Gpu, Source
from kubectl_gpu.workflows import reports
from tests.conftest import ROOT
from tests.kit.plane.plane import ControlPlane

SCHEMA = json.loads((ROOT / "schemas" / "node-report.v1.json").read_text())
NOW = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.timezone.utc)
CRD_FILE = "gpunodereports.crd.yaml"
_DROPPED = {"$schema", "$id", "$defs", "title", "additionalProperties", "$ref", "const"}


def crd() -> dict[str, Any]:
    text = (resources.files("kubectl_gpu") / "manifests" / CRD_FILE).read_text()
    document: dict[str, Any] = yaml.safe_load(text)
    return document


def structural(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A JSON Schema → Kubernetes structural schema: refs inlined, `[T, null]` → nullable,
    no additionalProperties beside properties, `const` → a one-value enum, an enum that allows
    null → nullable without the enum."""
    if "$ref" in node:
        target = structural(defs[node["$ref"].rsplit("/", 1)[1]], defs)
        return {**target, **({"description": node["description"]} if "description" in node else {})}
    out: dict[str, Any] = {k: v for k, v in node.items() if k not in _DROPPED}
    types = node.get("type")
    if isinstance(types, list):
        out["type"] = next(t for t in types if t != "null")
        out["nullable"] = True
    if "enum" in node and None in node["enum"]:
        # kube-apiserver (1.37) checks an enum even on a nullable field's null and refuses it
        # ("Unsupported value: null"), with or without null among the values: no enum then
        del out["enum"]
        out["nullable"] = True
    if "enum" in node and "type" not in node:
        out["type"] = "string"
    if "properties" in node:
        out["properties"] = {k: structural(v, defs) for k, v in node["properties"].items()}
    if "items" in node:
        out["items"] = structural(node["items"], defs)
    return out


def expected_openapi_schema() -> dict[str, Any]:
    top = structural(SCHEMA, SCHEMA["$defs"])
    top["properties"].update(
        apiVersion={"type": "string"}, kind={"type": "string"}, metadata={"type": "object"}
    )
    top.pop("description", None)
    return top


def test_the_crd_is_a_cluster_scoped_v1_definition_of_gpunodereports() -> None:
    document = crd()

    assert (document["apiVersion"], document["kind"]) == (
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
    )
    spec = document["spec"]
    assert document["metadata"]["name"] == "gpunodereports.kubectl-gpu.io"
    assert (spec["group"], spec["scope"]) == ("kubectl-gpu.io", "Cluster")
    assert spec["names"]["kind"] == "GPUNodeReport"
    assert spec["names"]["plural"] == "gpunodereports"
    [version] = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)
    headers = [c["name"] for c in version["additionalPrinterColumns"]]
    assert headers == ["Node", "GPUs", "Allocations", "Age"]
    for column in version["additionalPrinterColumns"]:
        assert column["jsonPath"].startswith(".") and column["type"] in (
            "string",
            "integer",
            "date",
        )


def test_the_crd_schema_says_what_the_json_schema_says() -> None:
    [version] = crd()["spec"]["versions"]

    assert version["schema"]["openAPIV3Schema"] == expected_openapi_schema()


def test_the_crd_schema_is_structural() -> None:
    """Kubernetes rejects `additionalProperties` beside `properties`, `$ref` and type lists."""
    [version] = crd()["spec"]["versions"]

    def walk(node: dict[str, Any], where: str) -> None:
        assert (
            not ({"$ref", "additionalProperties", "const"} & node.keys())
            or "properties" not in node
        ), where
        assert isinstance(node.get("type"), str), f"{where} has no single type"
        for name, child in (node.get("properties") or {}).items():
            walk(child, f"{where}.{name}")
        if "items" in node:
            walk(node["items"], f"{where}[]")

    walk(version["schema"]["openAPIV3Schema"], "")


def test_the_crd_ships_in_the_package_data() -> None:
    setup = (ROOT / "setup.cfg").read_text()
    assert "manifests/*.yaml" in setup


def _sample() -> report.NodeReport:
    gpu = Gpu(0, "GPU-11111111-2222-3333-4444-555555555555", "NVIDIA L4")
    held = Allocation(
        None, "ml", "trainer", "cuda", "nvidia.com/gpu", (gpu.uuid,), Source.PODRESOURCES
    )
    return report.build("node-a", [gpu], join.NodeSources(podresources=(held,)), NOW)


@pytest.fixture(scope="module")
def served(module_plane: ControlPlane) -> cluster.Api:
    """The CRD created on the real server (which validates it) and served; node-a there."""
    from tests.gpumap import reportbuilders  # here: it imports `crd` from this module

    api = cluster.connect(str(module_plane.kubeconfig))
    reportbuilders.install(api)
    api.create(cluster.path("nodes"), {"apiVersion": "v1", "kind": "Node",
                                       "metadata": {"name": "node-a"}})  # fmt: skip
    return api


@pytest.mark.usefixtures("real_control_plane")
def test_the_real_server_serves_the_report_once_the_crd_exists(
    served: cluster.Api, module_plane: ControlPlane
) -> None:
    reports.publish(served, _sample(), None)
    result = subprocess.run(
        [str(module_plane.kubectl), "--kubeconfig", str(module_plane.kubeconfig),
         "get", "gpunodereports", "node-a", "-o", "json"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    stored = json.loads(result.stdout)
    assert stored["kind"] == "GPUNodeReport" and stored["spec"] == {"node": "node-a"}
    assert stored["metadata"]["ownerReferences"][0]["kind"] == "Node"
    assert report.from_dict(stored) == _sample()


def _broken(name: str, **status: Any) -> dict[str, Any]:
    body = reports.body(_sample(), "0c5e5c4e-0000-4000-8000-000000000001", None)
    body["metadata"]["name"] = name
    body["status"].update(status)
    return body


@pytest.mark.usefixtures("real_control_plane")
def test_the_real_server_refuses_a_report_that_breaks_the_schema(served: cluster.Api) -> None:
    broken = _broken("broken-1", digest="md5:1234", gpuCount=-1)

    with pytest.raises(ClusterError) as refused:
        served.create(cluster.path("gpunodereports"), broken)

    assert refused.value.status == 422
    for field in ("status.digest", "status.gpuCount"):
        assert field in refused.value.message


@pytest.mark.usefixtures("real_control_plane")
def test_the_real_server_drops_a_field_the_schema_does_not_name(served: cluster.Api) -> None:
    created = served.create(cluster.path("gpunodereports"), _broken("pruned-1", surprise="x"))

    assert "surprise" not in created["status"] and created["status"]["gpuCount"] == 1
