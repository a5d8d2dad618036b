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


def rendered(kind: str, name: str = "kubectl-gpu-agent-own-node") -> Obj:
    objects = bundle.render(bundle.Options())
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


POLICY = rendered("ValidatingAdmissionPolicy")
BINDING = rendered("ValidatingAdmissionPolicyBinding")
PLUGIN_PODS = rendered("ValidatingAdmissionPolicy", "kubectl-gpu-agent-plugin-pods")
POLICIES = ("kubectl-gpu-agent-own-node", "kubectl-gpu-agent-plugin-pods")


@pytest.mark.parametrize("name", POLICIES)
@pytest.mark.parametrize("kind", ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"])
def test_the_objects_are_valid_admissionregistration_v1(kind: str, name: str) -> None:
    obj = rendered(kind, name)
    api = client.ApiClient()
    # client-side validation rejects missing required fields and bad enum values; the round
    # trip drops any field v1 does not define, so equality means every field is known.
    model = api.deserialize(json.dumps(obj), f"V1{kind}", "application/json")
    assert api.sanitize_for_serialization(model) == obj


@pytest.mark.parametrize("name", POLICIES)
def test_the_binding_denies_through_this_policy(name: str) -> None:
    policy, binding = (
        rendered("ValidatingAdmissionPolicy", name),
        rendered("ValidatingAdmissionPolicyBinding", name),
    )
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert policy["spec"]["failurePolicy"] == "Fail"


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


def admit(request: Obj, obj: Obj | None, old: Obj | None, policy: Obj = POLICY) -> str | None:
    """None when the policy lets the request through, else the message it denies with."""
    activation: Obj = {
        "request": celpy.json_to_cel(request),
        "object": celpy.json_to_cel(obj),
        "oldObject": celpy.json_to_cel(old),
    }
    spec = policy["spec"]
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


# ---- a Node's spec and finalizers -------------------------------------------------------------


def with_spec(obj: Obj, **spec: Any) -> Obj:
    return {**obj, "spec": spec}


@pytest.mark.parametrize(
    ("old_spec", "new_spec"),
    [
        ({}, {"unschedulable": True}),  # cordon
        ({"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}, {}),  # untaint
        ({}, {"taints": [{"key": "evict", "effect": "NoExecute"}]}),  # taint
        ({"podCIDR": "10.0.0.0/24"}, {"podCIDR": "10.9.0.0/24"}),
    ],
    ids=["cordon", "remove-taint", "add-taint", "pod-cidr"],
)
def test_the_agent_may_not_change_its_nodes_spec(old_spec: Obj, new_spec: Obj) -> None:
    old = with_spec(node("gpu-a", dict(GFD)), **old_spec)
    new = with_spec(node("gpu-a", {**GFD, keys.MIG_STATE_LABEL: "success"}), **new_spec)
    denied = admit(request("UPDATE"), new, old)
    assert denied is not None and "spec" in denied


def test_a_label_patch_that_keeps_the_spec_is_admitted() -> None:
    spec = {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}], "podCIDR": "10.0.0.0/24"}
    old = with_spec(node("gpu-a", dict(GFD)), **spec)
    new = with_spec(node("gpu-a", {**GFD, keys.MIG_STATE_LABEL: "success"}), **spec)
    assert admit(request("UPDATE"), new, old) is None


@pytest.mark.parametrize("resource", ["nodes", "gpunodereports"])
def test_the_agent_may_not_add_or_remove_finalizers(resource: str) -> None:
    old = node("gpu-a", dict(GFD))
    held = {**old, "metadata": {**old["metadata"], "finalizers": ["example.com/hold"]}}
    added = admit(request("UPDATE", resource), held, old)
    removed = admit(request("UPDATE", resource), old, held)
    assert added is not None and "finalizers" in added
    assert removed is not None and "finalizers" in removed


# ---- deleting device plugin pods --------------------------------------------------------------


def pod(labels: Obj, container: str, node_name: str = "gpu-a") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "gpu-operator", "labels": labels},
        "spec": {"nodeName": node_name, "containers": [{"name": container, "image": "x"}]},
    }


PLUGIN_PODS_BY_LAYOUT = {
    "gpu-operator": pod({"app": "nvidia-device-plugin-daemonset"}, "nvidia-device-plugin"),
    "helm": pod({"app.kubernetes.io/name": "nvidia-device-plugin"}, "nvidia-device-plugin-ctr"),
    "bundle": pod({"app.kubernetes.io/name": bundle.DEVICE_PLUGIN}, "nvidia-device-plugin-ctr"),
    "static": pod({"name": "nvidia-device-plugin-ds"}, "nvidia-device-plugin-ctr"),
}


def delete_pod(old: Obj, *, on_node: str | None = "gpu-a", user: str = SA) -> str | None:
    req = request("DELETE", "pods", on_node=on_node, user=user)
    req["resource"]["group"] = ""
    return admit(req, None, old, PLUGIN_PODS)


@pytest.mark.parametrize("layout", sorted(PLUGIN_PODS_BY_LAYOUT))
def test_the_agent_may_delete_the_device_plugin_pod_on_its_node(layout: str) -> None:
    assert delete_pod(PLUGIN_PODS_BY_LAYOUT[layout]) is None


@pytest.mark.parametrize("layout", sorted(PLUGIN_PODS_BY_LAYOUT))
def test_the_plugin_pod_on_another_node_is_refused(layout: str) -> None:
    theirs = {**PLUGIN_PODS_BY_LAYOUT[layout]}
    theirs["spec"] = {**theirs["spec"], "nodeName": "gpu-b"}
    denied = delete_pod(theirs)
    assert denied is not None and "only on the node it runs on" in denied
    assert delete_pod(PLUGIN_PODS_BY_LAYOUT[layout], on_node=None) is not None


@pytest.mark.parametrize(
    "victim",
    [
        pod({"app": "nvidia-driver-daemonset"}, "nvidia-driver-ctr"),  # the operator's driver
        pod({"app": "nvidia-container-toolkit-daemonset"}, "nvidia-container-toolkit-ctr"),
        # NVIDIA's Helm chart's GFD pods carry the plugin's labels (docs/upstream-facts.md P6)
        pod({"app.kubernetes.io/name": "nvidia-device-plugin"}, "gpu-feature-discovery-ctr"),
        pod({}, "nvidia-device-plugin-ctr"),  # the container name alone is not enough
    ],
    ids=["driver", "toolkit", "helm-gfd", "unlabelled"],
)
def test_other_pods_in_the_plugin_namespace_are_refused(victim: Obj) -> None:
    denied = delete_pod(victim)
    assert denied is not None and "only NVIDIA device plugin pods" in denied


def test_the_pod_policy_matches_only_the_agents_deletes() -> None:
    rules = PLUGIN_PODS["spec"]["matchConstraints"]["resourceRules"]
    assert rules == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"],
                      "resources": ["pods"]}]  # fmt: skip
    driver = pod({"app": "nvidia-driver-daemonset"}, "nvidia-driver-ctr")
    assert delete_pod(driver, user="kubernetes-admin", on_node=None) is None


@pytest.mark.parametrize("layout", ["gpu-operator", "helm", "static"])
def test_the_allowed_labels_are_those_of_nvidias_plugin_pods(layout: str) -> None:
    from tests.kit.kube.layouts import LAYOUTS

    found = LAYOUTS[layout]()
    [variable] = [v for v in PLUGIN_PODS["spec"]["variables"] if v["name"] == "pluginLabels"]
    pairs = {"=".join(pair) for pair in evaluate(variable["expression"], {})}
    assert set(found.plugin_selector.split(",")) & pairs
    [containers] = [v for v in PLUGIN_PODS["spec"]["variables"] if v["name"] == "pluginContainers"]
    assert found.plugin_container in evaluate(containers["expression"], {})
