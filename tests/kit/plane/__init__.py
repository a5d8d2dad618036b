"""A real Kubernetes control plane for the tests and the demo (test code only).

`ControlPlane` (plane.py) runs etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
KWOK from binaries built by scripts/gobins.py (found by tests/kit/kube/builds.py), through
`processes.py` (spawn, keep, wait, end), `components.py` and `kwok.py` (their command lines, KWOK's
gate), `crds.py`, `rawapi.py` (the admin's raw requests), `users.py` (tokens, users, kubeconfigs)
and `auditlog.py`; `sharedplane.py` and `fixtures.py` share one per test session, `staticplane.py`
one with no controllers, `helmplane.py` lays NVIDIA's Helm chart on it. `ApiStore` (store.py) and
`ControlLoop` (loop.py) are what the kit writes and reacts with; `netns.py` gives nodes their
network namespaces, `faults.py` a proxy that misbehaves on demand. Must not import the node or
cluster floors.
"""

from __future__ import annotations

from tests.kit.plane.plane import ControlPlane, ControlPlaneError, binaries

__all__ = ["ControlPlane", "ControlPlaneError", "binaries"]
