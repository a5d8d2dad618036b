"""NVIDIA's Helm chart on the static plane, for the `share` workflow tests: its objects installed,
pods of its DaemonSets that are Running and Ready as the chart labels them, and a clock that
moves only when someone sleeps. The fixture `api` (tests/workflows/conftest.py) lays this out
on two GPU nodes. Test code only; must not start anything."""

from __future__ import annotations

from typing import Any

from tests.kit.kube import ApiError, layouts
from tests.kit.kube.client import ByName

Obj = dict[str, Any]
NAMESPACE = "nvidia-device-plugin"


class FakeClock:
    """Time that passes only when someone sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def pod(name: str, node: str, owner: str, container: str) -> Obj:
    """A Running, Ready pod of DaemonSet `owner` on `node`, labelled as the Helm chart labels."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {
                "app.kubernetes.io/name": "nvidia-device-plugin",
                "app.kubernetes.io/instance": "nvdp",
            },
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "DaemonSet",
                    "name": owner,
                    "uid": f"uid-{owner}",
                    "controller": True,
                }
            ],
        },
        "spec": {"nodeName": node, "containers": [{"name": container, "image": "x"}]},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {
                    "name": container,
                    "ready": True,
                    "restartCount": 0,
                    "image": "x",
                    "imageID": "x",
                    "state": {"running": {}},
                }
            ],
        },
    }


# cluster-wide objects the cleanup after each test leaves (it deletes what is in namespaces, and
# the nodes): the same for every test, so one kept from an earlier test is the one wanted
KEPT = ("Namespace", "ClusterRole", "ClusterRoleBinding")


def install(store: ByName, layout: layouts.Layout) -> None:
    """The layout's objects, and the namespace's `default` ServiceAccount, which admission
    wants before it admits a pod (the controller-manager would have made it)."""
    account = {"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": "default", "namespace": layout.namespace}}  # fmt: skip
    for obj in (*layout.objects, account):
        try:
            store.create(obj)
        except ApiError as e:
            if e.code != 409 or obj["kind"] not in KEPT:
                raise


def live_pods(store: ByName) -> list[Obj]:
    """The namespace's pods not being deleted."""
    return [p for p in store.list("pods", NAMESPACE) if not p["metadata"].get("deletionTimestamp")]
