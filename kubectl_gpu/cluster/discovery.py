"""What the API server serves: the versions of an API group, asked of its discovery endpoint.

Owns `served_versions`. Must not decide which version a command uses (the workflows do).
"""

from __future__ import annotations

from urllib.parse import quote

from kubectl_gpu.cluster.api import Api
from kubectl_gpu.errors import ClusterError


def served_versions(api: Api, group: str) -> list[str]:
    """The versions the server serves of an API group, its preferred one first; [] when it
    serves none (an older server, or the group's feature is off)."""
    try:
        found = api.get(f"/apis/{quote(group, safe='')}")
    except ClusterError as e:
        if e.status == 404:
            return []
        raise
    versions = [str(v.get("version")) for v in found.get("versions") or [] if v.get("version")]
    preferred = str((found.get("preferredVersion") or {}).get("version") or "")
    return sorted(versions, key=lambda v: v != preferred)
