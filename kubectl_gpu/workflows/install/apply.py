"""Applying objects like `kubectl apply`: idempotent, object by object, undone on failure.

Owns `apply` (read each object; create it when missing; when the fields we own differ, replace
it keeping everything the server or others added; otherwise leave it alone; say which per
object: created / configured / unchanged; if a write fails half-way, delete what this call
created) and `delete` (a 404 is no error: a namespace or CRD took the object along). Must not
choose what to apply (`install` and `uninstall` do).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from kubectl_gpu import bundle, cluster
from kubectl_gpu.errors import ClusterError, GpuError
from kubectl_gpu.workflows.install.objects import (
    Action,
    DryRun,
    Json,
    Outcome,
    collection_of,
    merged,
    owned_fields_match,
    read,
    url_of,
)

log = logging.getLogger(__name__)


def apply(api: cluster.Api, objects: Iterable[Json], dry_run: DryRun = "none") -> list[Outcome]:
    """Bring each object to its manifest; `client`: only read and say what would change.
    When a write fails, the objects this call created are deleted again (newest first)."""
    outcomes: list[Outcome] = []
    try:
        _apply_each(api, objects, dry_run, outcomes)
    except GpuError as e:
        created = [o for o in outcomes if o.action == "created"]
        if dry_run == "none":
            for o in reversed(created):
                delete(api, {"kind": o.kind, "metadata": {"name": o.name,
                              "namespace": o.namespace}}, False)  # fmt: skip
        e.message = (f"{e.message}; install stopped there and removed the {len(created)} "
                     "object(s) it had created")  # fmt: skip
        raise
    return outcomes


def _apply_each(
    api: cluster.Api, objects: Iterable[Json], dry_run: DryRun, outcomes: list[Outcome]
) -> None:
    unborn: set[str] = set()  # namespaces a server dry run "created" but did not keep
    for obj in objects:
        kind, namespace, name = bundle.identity(obj)
        live = None if namespace in unborn else read(api, obj)
        if live is None:
            action: Action = "created"
            if kind == "Namespace" and dry_run == "server":
                unborn.add(name)
            if namespace in unborn:
                # The server would answer 404 for the namespace (so does `kubectl apply
                # --dry-run=server`): this object is judged here, not checked there.
                log.warning("%s/%s: not checked by the server (its namespace does not exist "
                            "yet)", kind.lower(), name)  # fmt: skip
            elif dry_run != "client":
                api.create(collection_of(obj), obj, dry_run=dry_run == "server")
        elif owned_fields_match(live, obj):
            action = "unchanged"
        else:
            action = "configured"
            if dry_run != "client":
                api.replace(url_of(obj), merged(live, obj), dry_run=dry_run == "server")
        log.info("%s/%s %s", kind.lower(), name, action)
        outcomes.append(Outcome(kind, namespace, name, action))


def delete(api: cluster.Api, obj: Json, dry_run: bool) -> None:
    try:
        api.delete(url_of(obj), dry_run=dry_run)
    except ClusterError as e:
        if e.status != 404:  # gone meanwhile (a namespace or CRD took it along)
            raise
