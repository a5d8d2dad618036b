"""The static plane: the real kube-apiserver (RBAC and admission on) with no controller-manager,
scheduler or KWOK, so that nothing but the test changes what it wrote -- no DaemonSet replaces a
deleted pod, no node changes its capacity, no garbage collector removes a pod whose owner is not
there, and no kubelet finishes a pod's graceful deletion (it stays Terminating).

Owns two fixtures, registered once by tests/conftest.py: `static_plane`, one per test session
(per pytest-xdist worker; a few seconds to start), started only when a test asks for it;
`static_client`, the official client on it as the administrator, by name (the plane's own, so
its discovery is read once; tests.kit.kube.client), and `static_store`, an `ApiStore` on it,
for what needs a raw request. With either, everything a test wrote in its
namespaces and every node is deleted after the test (the namespaces stay: with no namespace
controller a deleted one would never go). A test that uses it gets a real-plane test's timeout:
the first one waits for the plane to start. What is laid out on it (NVIDIA's Helm chart) is in
helmplane.py; must not lay anything out itself."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kit.kube.client import KubeClient
from tests.kit.plane.plane import ControlPlane
from tests.kit.plane.store import ApiStore

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
def static_client(static_plane: ControlPlane, static_store: ApiStore) -> KubeClient:
    """The official client on the static plane; what the test wrote goes with `static_store`'s
    clean-up."""
    return static_plane.client


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
