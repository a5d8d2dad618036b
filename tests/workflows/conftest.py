"""A static API for the workflow tests: the real kube-apiserver (RBAC and admission on) with no
controller-manager, scheduler or KWOK, so that nothing but the test changes what it wrote -- no
DaemonSet replaces a deleted pod, no node changes its capacity, no garbage collector removes a
pod whose owner is not there, and no kubelet finishes a pod's graceful deletion (it stays
Terminating). Time is the test's own (a fake clock), so every wait ends at its deadline.

`static_plane`: one per test session (per pytest-xdist worker; a few seconds to start).
`static_store`: an `ApiStore` on it, as the administrator. `api`: NVIDIA's Helm chart on it
(tests/kit/plane/helmplane.py) with two GPU nodes, a plugin and a GFD pod on each, and the
product's own client to it. Everything a test wrote
in its namespaces and every node is deleted after the test (the namespaces stay: with no
namespace controller a deleted one would never go). A test that uses it gets a real-plane
test's timeout: the first one waits for the plane to start.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubectl_gpu import cluster
from tests.kit.kube import layouts
from tests.kit.plane.helmplane import install, pod
from tests.kit.plane.plane import ControlPlane
from tests.kit.plane.store import ApiStore
from tests.workflows.sharebuilders import gpu_node

# the namespaces kube-apiserver makes for itself
SYSTEM = {"default", "kube-system", "kube-public", "kube-node-lease"}
# what the workflow tests write in a namespace of theirs
NAMESPACED = ("/api/v1/{}/pods", "/api/v1/{}/configmaps", "/apis/apps/v1/{}/daemonsets",
              "/api/v1/{}/serviceaccounts")  # fmt: skip


@pytest.fixture(scope="session")
def static_plane() -> Iterator[ControlPlane]:
    try:
        plane = ControlPlane(kwok=False, controllers=False, scheduler=False).start()
    except Exception as error:  # the build step's or a component's own words
        pytest.fail(f"the real API server did not start: {error}", pytrace=False)
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture
def static_store(static_plane: ControlPlane, real_control_plane: None) -> Iterator[ApiStore]:
    creds = static_plane.creds
    assert creds is not None
    store = ApiStore(static_plane.url, creds.admin_token, creds.ca_cert)
    try:
        yield store
    finally:
        for namespace in store.list("namespaces"):
            name = namespace["metadata"]["name"]
            if name not in SYSTEM:
                for collection in NAMESPACED:
                    path = collection.format(f"namespaces/{name}")
                    store.request("DELETE", f"{path}?gracePeriodSeconds=0")
        store.request("DELETE", "/api/v1/nodes")
        store.close()


@pytest.fixture
def api(static_store: ApiStore, static_plane: ControlPlane) -> cluster.Api:
    """Helm's objects, two GPU nodes, a plugin and a GFD pod on each; no controllers."""
    layout = layouts.helm({"any": "version: v1\n"}, "any")
    install(static_store, layout)
    plugin, gfd = layout.plugin_daemonset, str(layout.gfd_daemonset)
    for name, gpus in (("gpu-a", 2), ("gpu-b", 1)):
        static_store.create(gpu_node(name, gpus))
        static_store.create(pod(f"plugin-{name}", name, plugin, "nvidia-device-plugin-ctr"))
        static_store.create(pod(f"gfd-{name}", name, gfd, "gpu-feature-discovery-ctr"))
    return cluster.connect(str(static_plane.kubeconfig))
