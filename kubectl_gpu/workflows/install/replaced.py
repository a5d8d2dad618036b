"""The device plugin `install --replace-plugin` replaces: deleted, kept, and given back.

Owns deleting each plugin DaemonSet the plan replaces, keeping its manifest first in a
ConfigMap of our namespace (`REPLACED_CONFIGMAP`, key `<namespace>.<name>`), and `restore`,
which `uninstall` runs to create each kept DaemonSet again (one that cannot be created is saved
to a file and the command that creates it is said). Must not decide what is replaced
(`preflight.decide` does).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable

from kubectl_gpu import bundle, cluster
from kubectl_gpu.errors import ClusterError, GpuError
from kubectl_gpu.sharing.deployment import Found
from kubectl_gpu.workflows.install.apply import apply, delete
from kubectl_gpu.workflows.install.objects import (
    DryRun,
    Json,
    Outcome,
    collection_of,
    read,
    url_of,
)

log = logging.getLogger(__name__)
# What `--replace-plugin` deleted, kept in our namespace (key `<namespace>.<name>`: the
# DaemonSet's manifest as JSON) so that `uninstall` can put it back.
REPLACED_CONFIGMAP = "kubectl-gpu-replaced-plugins"


def keep(
    api: cluster.Api, objects: list[Json], replaced: Iterable[Found], dry_run: DryRun
) -> list[Outcome]:
    """Save each plugin DaemonSet `--replace-plugin` deletes in a ConfigMap of our namespace
    (created first), so that `uninstall` can restore what the user had."""
    namespace = next(o for o in objects if o["kind"] == "Namespace")
    outcomes = apply(api, [namespace], dry_run)
    name = str(namespace["metadata"]["name"])
    data = {}
    for found in replaced:
        live = read(api, _daemonset(found.namespace, found.name))
        if live is not None:
            data[f"{found.namespace}.{found.name}"] = json.dumps(_portable(live), sort_keys=True)
    keep = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": REPLACED_CONFIGMAP, "namespace": name},
        "data": data,
    }
    if dry_run == "client" or outcomes[0].action == "created" and dry_run == "server":
        return [*outcomes, Outcome("ConfigMap", name, REPLACED_CONFIGMAP, "kept")]
    live = read(api, keep)
    if live is None:
        api.create(collection_of(keep), keep, dry_run=dry_run == "server")
    else:
        merged_data = {**(live.get("data") or {}), **data}
        api.replace(url_of(keep), {**live, "data": merged_data}, dry_run=dry_run == "server")
    return [*outcomes, Outcome("ConfigMap", name, REPLACED_CONFIGMAP, "kept")]


def _daemonset(namespace: str, name: str) -> Json:
    return {"kind": "DaemonSet", "metadata": {"name": name, "namespace": namespace}}


def _portable(live: Json) -> Json:
    """A live object as a manifest to create again: what the server added left out."""
    meta = live.get("metadata") or {}
    kept = {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if k in meta}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": kept,
            "spec": live.get("spec") or {}}  # fmt: skip


def kept_plugins(api: cluster.Api, namespace: str) -> list[Json]:
    """The DaemonSets `install --replace-plugin` deleted and kept (none when it did not)."""
    keep = {"kind": "ConfigMap", "metadata": {"name": REPLACED_CONFIGMAP, "namespace": namespace}}
    live = read(api, keep)
    found = []
    for key, text in sorted(((live or {}).get("data") or {}).items()):
        try:
            manifest = json.loads(text)
        except ValueError:
            log.warning("%s key %s is not a manifest; not restored", REPLACED_CONFIGMAP, key)
            continue
        if isinstance(manifest, dict) and manifest.get("kind") == "DaemonSet":
            found.append(manifest)
    return found


def restore(api: cluster.Api, manifests: list[Json], dry_run: DryRun = "none") -> list[Outcome]:
    """Create each kept DaemonSet again; one that cannot be created is saved to a file and
    the command that creates it is said (GpuError, after the others were tried)."""
    outcomes, failed = [], []
    for manifest in manifests:
        kind, namespace, name = bundle.identity(manifest)
        try:
            if dry_run != "client" and read(api, manifest) is None:
                api.create(collection_of(manifest), manifest, dry_run=dry_run == "server")
        except ClusterError as e:
            failed.append(f"{kind.lower()}/{name} -n {namespace}: {e.message}; to restore it: "
                          f"kubectl create -f {_saved(manifest)}")  # fmt: skip
            continue
        outcomes.append(Outcome(kind, namespace, name, "restored"))
    if failed:
        raise GpuError(
            "could not restore the device plugin --replace-plugin had replaced: "
            + "; ".join(failed),
            hint="the rest of the uninstall is done",
        )
    return outcomes


def _saved(manifest: Json) -> str:
    import tempfile

    _, _, name = bundle.identity(manifest)
    handle, path = tempfile.mkstemp(prefix=f"kubectl-gpu-restore-{name}-", suffix=".json")
    with open(handle, "w", encoding="utf-8") as stream:
        json.dump(manifest, stream, indent=2)
    return path


def replace(api: cluster.Api, found: Found, dry_run: DryRun) -> Outcome:
    obj = {"kind": "DaemonSet", "metadata": {"name": found.name, "namespace": found.namespace}}
    if dry_run != "client":
        delete(api, obj, dry_run == "server")
    log.warning("deleted %s: replaced by the bundle's device plugin", found.describe())
    return Outcome("DaemonSet", found.namespace, found.name, "deleted")
