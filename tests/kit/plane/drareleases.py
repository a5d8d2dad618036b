"""Real API servers that serve resource.k8s.io as each Kubernetes release did: at v1 only
(1.34 on), at v1beta2 only (as 1.33 preferred it), at v1beta1 only (1.32), or not at all.

Owns starting, for a test module, a kube-apiserver of the pinned release told by
`--runtime-config` which versions to serve (with its etcd, and nothing else: the real
controller-manager and scheduler watch v1 objects and would wait for them forever on a server
that does not serve v1; objects a scheduler would write are then the test's to write), and which
paths a command requested, read from the server's audit log. Must not know about GPUs.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

import pytest

from tests.kit.plane import ControlPlane
from tests.kit.plane.store import ApiStore

# resource.k8s.io/v1 is on by default from 1.34, the betas off: each set turns on one version.
RUNTIME_CONFIG = {
    "v1": (),
    "v1beta2": ("resource.k8s.io/v1=false", "resource.k8s.io/v1beta2=true"),
    "v1beta1": ("resource.k8s.io/v1=false", "resource.k8s.io/v1beta1=true"),
    "none": ("resource.k8s.io/v1=false",),
}


BETAS = (
    "consumable capacity, partitionable devices and extended resources served by DRA are "
    "alpha, off, before Kubernetes 1.36"
)


def betas_on(plane: ControlPlane) -> bool:
    """Whether the plane's release serves the DRA features `BETAS` names."""
    return tuple(int(n) for n in plane.version.split(".")) >= (1, 36)


@dataclasses.dataclass
class ServedPlane:
    version: str  # the one version of resource.k8s.io served, or "none"
    plane: ControlPlane
    store: ApiStore

    def namespace(self, name: str) -> None:
        """Namespace `name` with the ServiceAccount `default` the controller-manager (not run
        here) would make: the server admits no pod in a namespace without it."""
        self.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        self.store.create({"apiVersion": "v1", "kind": "ServiceAccount",
                           "metadata": {"name": "default", "namespace": name}})  # fmt: skip

    def mark(self) -> int:
        """Where the audit log is now: `paths_since(mark)` reads what came after."""
        return len(self.plane.audit())

    def paths_since(self, mark: int) -> set[str]:
        """The paths (no query) of every request the server received after `mark`."""
        return {
            str(e.get("requestURI", "")).partition("?")[0]
            for e in self.plane.audit()[mark:]
            if e.get("stage") == "RequestReceived"
        }


@contextlib.contextmanager
def serving(version: str) -> Iterator[ServedPlane]:
    """A plane serving resource.k8s.io at `version` only (the session's release)."""
    plane = ControlPlane(
        kwok=False,
        controllers=False,
        scheduler=False,
        runtime_config=RUNTIME_CONFIG[version],
        node_authorizer=version == "v1",  # its graph watches v1 ResourceSlices
    )
    try:
        plane.start()
    except Exception as error:  # the build step's or a component's own words
        pytest.fail(f"the real control plane did not start: {error}", pytrace=False)
    assert plane.creds is not None
    store = ApiStore(plane.url, plane.creds.admin_token, plane.creds.ca_cert)
    try:
        groups = {
            g["name"]: [v["version"] for v in g["versions"]]
            for g in store.request("GET", "/apis")["groups"]
        }
        assert groups.get("resource.k8s.io", []) == ([] if version == "none" else [version])
        yield ServedPlane(version, plane, store)
    finally:
        store.close()
        plane.stop()
