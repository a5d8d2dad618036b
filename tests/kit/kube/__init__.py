"""What the tests say to and about Kubernetes, whichever real API server answers (test code only).

Owns `KubeClient` (`client`: objects by name through the official kubernetes client, what
product tests arrange and inspect a cluster with), `ApiError` (a failed request as the
server's `kind: Status` tells it), plain object
builders (`objects`: nodes, pods, CustomResourceDefinitions; `layouts` and `manifests`: the
objects of NVIDIA's three deployments of its device plugin), `KubectlRunner`
(the real kubectl binary, isolated from the user's setup) and `builds` (where every program
the kit runs lies once scripts/gobins.py built it). Must not start or imitate a server: the
servers are real (tests/kit/plane).
"""

from __future__ import annotations

from tests.kit.kube.errors import ApiError

__all__ = ["ApiError"]
