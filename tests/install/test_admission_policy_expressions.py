"""The agent's ValidatingAdmissionPolicy: a valid admissionregistration.k8s.io/v1 object whose
CEL expressions, parsed and evaluated here (cel-python) on AdmissionRequest-shaped inputs,
let the agent change only its own Node (and report) and only the label keys it drives."""

from __future__ import annotations

import json
from typing import Any

import celpy
import pytest
from kubernetes import client

from kubectl_gpu import bundle, keys

SA = "system:serviceaccount:kubectl-gpu:kubectl-gpu-agent"
NODE_CLAIM = "authentication.kubernetes.io/node-name"
Obj = dict[str, Any]


def rendered(kind: str) -> Obj:
    return next(o for o in bundle.render(bundle.Options()) if o["kind"] == kind)


POLICY = rendered("ValidatingAdmissionPolicy")
BINDING = rendered("ValidatingAdmissionPolicyBinding")


@pytest.mark.parametrize("kind", ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"])
def test_the_objects_are_valid_admissionregistration_v1(kind: str) -> None:
    obj = rendered(kind)
    api = client.ApiClient()
    # client-side validation rejects missing required fields and bad enum values; the round
    # trip drops any field v1 does not define, so equality means every field is known.
    model = api.deserialize(json.dumps(obj), f"V1{kind}", "application/json")
    assert api.sanitize_for_serialization(model) == obj


def test_the_binding_denies_through_this_policy() -> None:
    assert BINDING["spec"]["policyName"] == POLICY["metadata"]["name"]
    assert BINDING["spec"]["validationActions"] == ["Deny"]
    assert POLICY["spec"]["failurePolicy"] == "Fail"


def test_the_label_allow_list_is_the_keys_the_agent_drives() -> None:
    [variable] = [v for v in POLICY["spec"]["variables"] if v["name"] == "nvidiaLabelKeys"]
    assert evaluate(variable["expression"], {}) == list(bundle.AGENT_NVIDIA_LABELS)


# ---- a small admission evaluator: matchConditions, then variables, then validations ----------


def evaluate(expression: str, activation: Obj) -> Any:
    env = celpy.Environment()
    program = env.program(env.compile(expression))
    return _plain(program.evaluate(activation))


def _plain(value: Any) -> Any:
    if isinstance(value, celpy.celtypes.MapType):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, celpy.celtypes.ListType):
        return [_plain(v) for v in value]
    if isinstance(value, celpy.celtypes.BoolType):
        return bool(value)
    if isinstance(value, celpy.celtypes.StringType):
        return str(value)
    return value


def admit(request: Obj, obj: Obj | None, old: Obj | None) -> str | None:
    """None when the policy lets the request through, else the message it denies with."""
    activation: Obj = {
        "request": celpy.json_to_cel(request),
        "object": celpy.json_to_cel(obj),
        "oldObject": celpy.json_to_cel(old),
    }
    spec = POLICY["spec"]
    if not all(evaluate(c["expression"], activation) for c in spec["matchConditions"]):
        return None
    variables: Obj = {}
    for variable in spec["variables"]:
        activation["variables"] = celpy.json_to_cel(variables)
        variables[variable["name"]] = evaluate(variable["expression"], activation)
    activation["variables"] = celpy.json_to_cel(variables)
    for validation in spec["validations"]:
        if not evaluate(validation["expression"], activation):
            return str(validation["message"])
    return None


def node(name: str, labels: Obj | None = None, annotations: Obj | None = None) -> Obj:
    meta: Obj = {"name": name}
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta}


def request(
    operation: str,
    resource: str = "nodes",
    *,
    user: str = SA,
    on_node: str | None = "gpu-a",
) -> Obj:
    extra = {NODE_CLAIM: [on_node]} if on_node is not None else {}
    group = "" if resource == "nodes" else "kubectl-gpu.io"
    return {
        "operation": operation,
        "resource": {"group": group, "version": "v1", "resource": resource},
        "userInfo": {"username": user, "groups": ["system:serviceaccounts"], "extra": extra},
    }


GFD = {"nvidia.com/gpu.product": "NVIDIA-H100", "kubernetes.io/hostname": "gpu-a"}


def test_the_agent_may_set_its_state_label_on_its_own_node() -> None:
    old = node("gpu-a", dict(GFD))
    new = node("gpu-a", {**GFD, keys.MIG_STATE_LABEL: "success"}, {keys.MIG_PHASE_ANNOTATION: "x"})
    assert admit(request("UPDATE"), new, old) is None


@pytest.mark.parametrize("label", bundle.AGENT_NVIDIA_LABELS)
def test_the_agent_may_set_the_nvidia_labels_it_drives(label: str) -> None:
    assert admit(request("UPDATE"), node("gpu-a", {**GFD, label: "x"}), node("gpu-a", GFD)) is None


def test_the_agent_may_remove_its_own_labels() -> None:
    old = node("gpu-a", {**GFD, keys.MIG_DESIRED_LABEL: "all-1g"})
    assert admit(request("UPDATE"), node("gpu-a", dict(GFD)), old) is None


def test_another_node_is_refused() -> None:
    new = node("gpu-b", {keys.MIG_STATE_LABEL: "success"})
    denied = admit(request("UPDATE"), new, node("gpu-b", {}))
    assert denied is not None and "only the Node it runs on" in denied


def test_a_token_without_a_node_claim_is_refused() -> None:
    new = node("gpu-a", {keys.MIG_STATE_LABEL: "success"})
    assert admit(request("UPDATE", on_node=None), new, node("gpu-a", {})) is not None


@pytest.mark.parametrize(
    ("old_labels", "new_labels"),
    [
        (GFD, {**GFD, "team": "ml"}),  # adding a foreign key
        (GFD, {**GFD, "nvidia.com/gpu.product": "NVIDIA-A100"}),  # changing one
        (GFD, {"kubernetes.io/hostname": "gpu-a"}),  # removing one
        (GFD, {**GFD, "kubectl-gpu.iox/evil": "1"}),  # a look-alike prefix
        (None, {"node-role.kubernetes.io/control-plane": ""}),  # no labels before
    ],
)
def test_labels_outside_the_allow_list_are_refused(old_labels: Obj, new_labels: Obj) -> None:
    denied = admit(request("UPDATE"), node("gpu-a", new_labels), node("gpu-a", old_labels))
    assert denied is not None and "labels" in denied


def test_annotations_outside_our_prefix_are_refused() -> None:
    old = node("gpu-a", GFD, {"node.alpha.kubernetes.io/ttl": "0"})
    new = node("gpu-a", GFD, {"node.alpha.kubernetes.io/ttl": "30"})
    denied = admit(request("UPDATE"), new, old)
    assert denied is not None and "annotations" in denied


def test_other_users_are_not_this_policys_business() -> None:
    new = node("gpu-b", {"team": "ml"})
    admin = request("UPDATE", user="kubernetes-admin", on_node=None)
    assert admit(admin, new, node("gpu-b", {})) is None
    other_sa = request("UPDATE", user="system:serviceaccount:default:kubectl-gpu-agent")
    assert admit(other_sa, new, node("gpu-b", {})) is None


def test_the_agent_writes_only_its_own_nodes_report_with_any_labels() -> None:
    report = {"apiVersion": "kubectl-gpu.io/v1", "kind": "GPUNodeReport"}
    mine = {**report, "metadata": {"name": "gpu-a", "labels": {"anything": "goes"}}}
    theirs = {**report, "metadata": {"name": "gpu-b"}}
    assert admit(request("CREATE", "gpunodereports"), mine, None) is None
    assert admit(request("CREATE", "gpunodereports"), theirs, None) is not None
    assert admit(request("DELETE", "gpunodereports"), None, theirs) is not None


def test_deleting_a_node_is_judged_by_the_old_object() -> None:
    assert admit(request("DELETE"), None, node("gpu-b", GFD)) is not None
