"""What pre-flight needs from the cluster, read before anything is written.

Owns `facts`: the server version, namespaces, RuntimeClasses, ClusterPolicies, DaemonSets,
nodes and the options an earlier install recorded on our namespace. A resource the cluster
does not serve (the ClusterPolicy CRD) reads as none. Must not write nor decide
(`preflight.decide` does).
"""

from __future__ import annotations

from kubectl_gpu import bundle, cluster, preflight
from kubectl_gpu.errors import ClusterError
from kubectl_gpu.workflows.install.objects import Json, read


def facts(api: cluster.Api, namespace: str) -> preflight.Facts:
    """What pre-flight needs, read before anything is written."""
    version = api.get("/version")
    minor = "".join(c for c in str(version.get("minor", "0")) if c.isdigit()) or "0"
    classes = {str(r["metadata"]["name"]): str(r.get("handler", ""))
               for r in _list(api, "runtimeclasses")}  # fmt: skip
    return preflight.Facts(
        (int(str(version.get("major", "1")) or 1), int(minor)),
        frozenset(str(n["metadata"]["name"]) for n in api.list(cluster.path("namespaces"))),
        classes,
        _list(api, "clusterpolicies"),
        _list(api, "daemonsets"),
        list(api.list(cluster.path("nodes"))),
        _installed(api, namespace),
    )


def _installed(api: cluster.Api, namespace: str) -> bundle.Options | None:
    found = bundle.recorded(read(api, {"kind": "Namespace", "metadata": {"name": namespace}}))
    return found[1] if found else None


def _list(api: cluster.Api, resource: str) -> list[Json]:
    try:
        return list(api.list(cluster.path(resource)))
    except ClusterError as e:
        if e.status == 404:  # the CRD (ClusterPolicy) or API group is not served
            return []
        raise
