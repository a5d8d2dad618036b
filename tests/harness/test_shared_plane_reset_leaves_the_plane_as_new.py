"""Between two tests the shared plane is reset to what it was before the first: whatever a
test left (a namespace with pods and their DaemonSet, a Node held by a finalizer, cluster-scoped
RBAC, a custom object) is gone, and the next test can make the same names again at once."""

from __future__ import annotations

import pytest

from tests.kit.kube import ApiError
from tests.kit.kube.objects import cluster_policy_crd, node, pod
from tests.kit.plane import sharedplane
from tests.kit.plane.store import ApiStore

pytestmark = pytest.mark.timeout(180)


def _leave_a_mess(store: ApiStore) -> None:
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t-mess"}})
    store.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "t-mess"},
         "data": {"a": "1"}}
    )  # fmt: skip
    held = node("gpu-mess")
    held["metadata"]["finalizers"] = ["kubectl-gpu.io/test"]
    store.create(held)
    store.create(pod("p", namespace="t-mess", node_name="gpu-mess"))
    store.create(
        {"apiVersion": "apps/v1", "kind": "DaemonSet",
         "metadata": {"name": "ds", "namespace": "t-mess"},
         "spec": {"selector": {"matchLabels": {"app": "ds"}},
                  "template": {"metadata": {"labels": {"app": "ds"}},
                               "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    )  # fmt: skip
    store.create(
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "t-mess"}, "rules": []}
    )  # fmt: skip
    try:
        store.create(cluster_policy_crd())
    except ApiError as e:  # a GPU Operator cluster ran before on this plane: its CRD stays
        assert e.code == 409, e


def test_a_reset_removes_what_a_test_left_and_the_names_are_free_again() -> None:
    plane = sharedplane.plane()
    assert plane.creds is not None
    store = ApiStore(plane.url, plane.creds.admin_token, plane.creds.ca_cert)
    try:
        for _ in range(2):  # the second round makes the same names right after the reset
            _leave_a_mess(store)
            assert any("t-mess" in left for left in sharedplane.leftovers())
            sharedplane.reset()
            assert sharedplane.leftovers() == []
    finally:
        store.close()
