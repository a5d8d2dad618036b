"""A long wait follows a collection with one LIST and one watch (`workflows.watched`); when the
server will not watch, the wait still sees every change: a user who may list but not watch pods
(403) is looked after with one LIST per look and no further watch, and a watch answered 410 Gone
(the version it starts from is too old, as after a long `--drain` before the rollout) is
followed by a fresh LIST, which shows what changed meanwhile, before the next watch.

On the real kube-apiserver, through the fault proxy, which refuses only the watch."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from kubectl_gpu import cluster
from kubectl_gpu.workflows.waiting import Timing
from kubectl_gpu.workflows.watched import Watched, picked
from tests.conftest import eventually
from tests.kit.plane.faults import Fault, FaultProxy

Json = dict[str, Any]
_names = itertools.count()


@pytest.fixture
def server(proxied_kubeconfig: Path) -> tuple[cluster.Api, str]:
    """The API server through the proxy, and a namespace of the test's own (the module's
    leftovers go when it ends)."""
    api, name = cluster.connect(str(proxied_kubeconfig)), f"watched-{next(_names)}"
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    api.create(cluster.path("namespaces"), namespace)
    return api, name


def _create_pod(api: cluster.Api, namespace: str, name: str) -> None:
    spec = {"containers": [{"name": "c", "image": "busybox"}]}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
    api.create(cluster.path("pods", namespace=namespace), pod)


def _names_in(view: Watched) -> set[str]:
    return {str(p["metadata"]["name"]) for p in view.items()}


def _kept(pod: Json) -> Json:
    return picked(pod, {"metadata": ("name",)})


def _requests(proxy: FaultProxy, url: str) -> tuple[list[str], list[str]]:
    """(LISTs, watches) of `url` the proxy saw."""
    asked = [s.path for s in proxy.seen if s.method == "GET" and s.path.startswith(url + "?")]
    watches = [p for p in asked if "watch=true" in p]
    return [p for p in asked if p not in watches], watches


def test_a_user_who_may_not_watch_is_looked_after_with_one_list_per_look(
    server: tuple[cluster.Api, str], fault_proxy: FaultProxy
) -> None:
    api, namespace = server
    url = cluster.path("pods", namespace=namespace)
    fault_proxy.add(Fault("GET", url, query="watch=true", status=403))
    _create_pod(api, namespace, "before")
    with Watched(api, url, _kept, Timing()) as view:
        assert _names_in(view) == {"before"}
        assert eventually(lambda: len(_requests(fault_proxy, url)[1]) == 1, 10)
        _create_pod(api, namespace, "after")
        lists_before = len(_requests(fault_proxy, url)[0])
        # the watch was refused: the change shows at the next look, which lists again
        assert eventually(lambda: "after" in {p["metadata"]["name"] for p in view.look()}, 10)
        lists, watches = _requests(fault_proxy, url)
        assert len(lists) > lists_before
        view.look()
        assert len(_requests(fault_proxy, url)[0]) == len(lists) + 1  # one LIST per look
    assert len(watches) == 1  # refused once: not asked again


def test_a_watch_answered_410_is_followed_by_a_fresh_list(
    server: tuple[cluster.Api, str], fault_proxy: FaultProxy
) -> None:
    api, namespace = server
    url = cluster.path("pods", namespace=namespace)
    # made on the server just before the watch is refused: only a new LIST can show it (the
    # next watch, through the proxy, answers only when the server ends it, 15 s later)
    made = Fault("GET", url, query="watch=true", status=410,
                 before=lambda: _create_pod(api, namespace, "meanwhile"))  # fmt: skip
    fault_proxy.add(made)
    with Watched(api, url, _kept, Timing()) as view:
        assert "meanwhile" not in _names_in(view)
        assert eventually(lambda: "meanwhile" in _names_in(view), 5)
    lists, watches = _requests(fault_proxy, url)
    assert made.times == 0 and len(lists) == 2, (lists, watches)
