"""docs/rbac.md: the ClusterRoles it tells admins to apply are valid rbac/v1 objects, and the
agent's table there lists exactly the resources the agent's roles grant."""

from __future__ import annotations

import json
import re

import yaml
from kubernetes import client

from kubectl_gpu import bundle
from tests.conftest import ROOT

DOC = (ROOT / "docs" / "rbac.md").read_text()


def test_the_user_roles_parse_and_are_valid_rbac_v1() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC, flags=re.S)
    roles = [r for block in blocks for r in yaml.safe_load_all(block)]
    assert [r["metadata"]["name"] for r in roles] == [
        "kubectl-gpu-view",
        "kubectl-gpu-edit",
        "kubectl-gpu-top",
    ]
    api = client.ApiClient()
    for role in roles:
        kind = "V1ClusterRole" if role["kind"] == "ClusterRole" else "V1Role"
        model = api.deserialize(json.dumps(role), kind, "application/json")
        assert api.sanitize_for_serialization(model) == role


def test_top_needs_only_get_on_pods_proxy_in_the_agents_namespace() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC, flags=re.S)
    [top] = [
        r
        for b in blocks
        for r in yaml.safe_load_all(b)
        if r["metadata"]["name"] == "kubectl-gpu-top"
    ]
    assert top["kind"] == "Role" and top["metadata"]["namespace"] == "kubectl-gpu"
    assert top["rules"] == [{"apiGroups": [""], "resources": ["pods/proxy"], "verbs": ["get"]}]


def test_the_agent_table_names_every_resource_the_agent_is_granted() -> None:
    objects = bundle.render(bundle.Options())
    granted = {
        r
        for o in objects
        if o["kind"] in ("Role", "ClusterRole") and o["metadata"]["name"].startswith(bundle.AGENT)
        for rule in o["rules"]
        for r in rule["resources"]
    }
    table = DOC.split("## People running")[0]
    assert all(resource in table for resource in granted), granted
