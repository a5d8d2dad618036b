"""A real Kubernetes control plane for the tests and the demo (test code only).

`ControlPlane` (plane.py) runs etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
KWOK from binaries built by scripts/gobins.py; `fixtures.py` shares one per test session.
"""

from __future__ import annotations

from tests.kit.plane.plane import ControlPlane, ControlPlaneError, binaries

__all__ = ["ControlPlane", "ControlPlaneError", "binaries"]
