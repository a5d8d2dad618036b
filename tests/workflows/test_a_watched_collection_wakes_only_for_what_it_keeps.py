"""A long wait (a `share` rollout, `mig apply --wait`) follows a collection with one LIST and one
watch on the real API server: the waiter wakes when what it keeps changes, not for the
collection's other objects (a node's heartbeat, another workload's pods), and finds a node's
pods without going through every pod of the namespace, also once an unplaced pod is bound."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

from kubectl_gpu import cluster
from kubectl_gpu.workflows.waiting import Timing
from kubectl_gpu.workflows.watched import Watched, picked
from tests.conftest import eventually
from tests.kit.kube.client import KubeClient
from tests.kit.plane.helmplane import NAMESPACE

Json = dict[str, Any]


def _pod(name: str, app: str, node: str = "") -> Json:
    spec: Json = {"containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    meta = {"name": name, "namespace": NAMESPACE, "labels": {"app": app}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _plugin_pods_only(pod: Json) -> Json | None:
    if (pod["metadata"].get("labels") or {}).get("app") != "plugin":
        return None
    return picked(pod, {"metadata": ("name", "labels"), "spec": ("nodeName",)})


def _node(pod: Json) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def test_the_waiter_sleeps_through_changes_to_objects_it_does_not_keep(
    api: cluster.Api, static_client: KubeClient
) -> None:
    static_client.create(_pod("other", "other", "gpu-a"))
    static_client.create(_pod("plugin", "plugin", "gpu-a"))
    url = cluster.path("pods", namespace=NAMESPACE)
    with Watched(api, url, _plugin_pods_only, Timing(), index=_node) as view:
        stop = threading.Event()

        def churn() -> None:  # another workload's pod changes all along: nothing read
            for n in itertools.count():
                if stop.wait(0.2):
                    return
                static_client.patch("pods", "other", {"metadata": {"labels": {"n": str(n)}}},
                                    namespace=NAMESPACE)  # fmt: skip

        churning = threading.Thread(target=churn)
        churning.start()
        try:
            began = time.monotonic()
            view.pause(2.0)
            slept = time.monotonic() - began
        finally:
            stop.set()
            churning.join()
        assert slept >= 1.9  # slept on through about ten changes to the other pod

        # changed while the waiter waits (a change before its wait is seen at its next look)
        label = {"metadata": {"labels": {"seen": "yes"}}}
        later = threading.Timer(
            0.5, lambda: static_client.patch("pods", "plugin", label, namespace=NAMESPACE)
        )
        began = time.monotonic()
        later.start()
        view.pause(10)
        later.join()
        assert time.monotonic() - began < 5  # woken by the change to what it keeps
        assert eventually(lambda: view.items_at(["gpu-a"])[0]["metadata"]["labels"].get("seen"), 10)


def test_a_nodes_pods_are_found_by_node_as_they_come_and_go(
    api: cluster.Api, static_client: KubeClient
) -> None:
    static_client.create(_pod("plugin-a", "plugin", "gpu-a"))
    static_client.create(_pod("unbound", "plugin"))  # not on a node yet
    static_client.create(_pod("other-b", "other", "gpu-b"))
    url = cluster.path("pods", namespace=NAMESPACE)
    with Watched(api, url, _plugin_pods_only, Timing(), index=_node) as view:

        def names(node: str) -> set[str]:
            return {p["metadata"]["name"] for p in view.items_at([node])}

        assert names("gpu-a") == {"plugin-a"}
        assert names("gpu-b") == set()  # the other workload's pod is not kept
        static_client.create(_pod("plugin-b", "plugin", "gpu-b"))
        # at once, as a kubelet confirms it (a bound pod stays Terminating on this plane)
        gone = {"gracePeriodSeconds": "0"}
        api.request("DELETE", cluster.path("pods", "plugin-a", NAMESPACE), query=gone)
        assert eventually(lambda: names("gpu-b") == {"plugin-b"} and not names("gpu-a"), 10)
        assert names("") == {"unbound"}
        # the scheduler's binding gives the pod its node: found there, no longer unplaced
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "unbound"},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-b"}}  # fmt: skip
        api.request("POST", cluster.path("pods", "unbound", NAMESPACE) + "/binding", body=binding)
        assert eventually(lambda: names("gpu-b") == {"plugin-b", "unbound"} and not names(""), 10)
