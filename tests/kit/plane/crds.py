"""CustomResourceDefinitions the plane itself serves while it starts (KWOK's `Logs`, kwok.py):
created, then waited for until the server says they are established.

Owns `serve`. Must not define a CRD (its owner does) nor create its objects.
"""

from __future__ import annotations

import time
from typing import Any

from tests.kit.plane.processes import ControlPlaneError
from tests.kit.plane.rawapi import RawApi

_CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def serve(api: RawApi, crd: dict[str, Any], deadline: float) -> None:
    """Create `crd` and wait until the server says it is established."""
    api.request("POST", _CRDS, crd)
    name = crd["metadata"]["name"]
    while time.monotonic() < deadline:
        conditions = (api.get(f"{_CRDS}/{name}").get("status") or {}).get("conditions") or []
        if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            return
        time.sleep(0.1)
    raise ControlPlaneError(f"CRD {name} was not established in time")
