"""Applying and removing the bundle: idempotent, object by object, like `kubectl apply`.

Owns `install` (read the cluster's facts, let `preflight.decide` choose the options and stop
on any problem before the first write, delete a plugin `--replace-plugin` replaces, apply,
then remove what an earlier install of another mode left that this one does not have; if a
write fails half-way, delete what this run created), `apply` (read each object; create it
when missing; when the fields we own differ, replace
it keeping everything the server or others added; otherwise leave it alone; say which per
object: created / configured / unchanged), `uninstall` (delete in reverse order, then take our
`kubectl-gpu.io/` labels and annotations off the nodes) and the rule of what we own: the
fields our manifest sets, except a ConfigMap's data, which belongs to `kubectl gpu share` and
`mig apply` once it exists. Must not render manifests (bundle.py) nor judge health
(install_status.py).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from kubectl_gpu import bundle, cluster, keys, preflight
from kubectl_gpu.errors import ClusterError, GpuError
from kubectl_gpu.sharing.deployment import Found
from kubectl_gpu.workflows.waiting import Timing

log = logging.getLogger(__name__)
Json = dict[str, Any]
Action = Literal[
    "created", "configured", "unchanged", "deleted", "not found", "cleaned", "kept", "restored"
]
# What `--replace-plugin` deleted, kept in our namespace (key `<namespace>.<name>`: the
# DaemonSet's manifest as JSON) so that `uninstall` can put it back.
REPLACED_CONFIGMAP = "kubectl-gpu-replaced-plugins"
DryRun = Literal["none", "client", "server"]

RESOURCES: dict[str, str] = {
    "Namespace": "namespaces",
    "CustomResourceDefinition": "customresourcedefinitions",
    "ServiceAccount": "serviceaccounts",
    "ClusterRole": "clusterroles",
    "ClusterRoleBinding": "clusterrolebindings",
    "Role": "roles",
    "RoleBinding": "rolebindings",
    "ValidatingAdmissionPolicy": "validatingadmissionpolicies",
    "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
    "ConfigMap": "configmaps",
    "DaemonSet": "daemonsets",
    "Node": "nodes",
    "RuntimeClass": "runtimeclasses",
}
_USER_DATA_KINDS = ("ConfigMap",)  # data written later by `share` / `mig apply`: never reset


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What happened (or, in a dry run, would happen) to one object."""

    kind: str
    namespace: str
    name: str
    action: Action

    @property
    def ref(self) -> str:
        """`daemonset.apps/name` style, as kubectl apply prints it."""
        return f"{self.kind.lower()}/{self.name}"


def url_of(obj: Mapping[str, Any]) -> str:
    kind, namespace, name = bundle.identity(dict(obj))
    return cluster.path(RESOURCES[kind], name, namespace or None)


def collection_of(obj: Mapping[str, Any]) -> str:
    kind, namespace, _ = bundle.identity(dict(obj))
    return cluster.path(RESOURCES[kind], namespace=namespace or None)


def read(api: cluster.Api, obj: Mapping[str, Any]) -> Json | None:
    """The live object, or None when it does not exist."""
    try:
        return api.get(url_of(obj))
    except ClusterError as e:
        if e.status == 404:
            return None
        raise


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


def check(plan: preflight.Plan) -> preflight.Plan:
    """`plan`, or one GpuError listing every problem (nothing has been written yet)."""
    if plan.problems:
        raise GpuError(
            f"pre-flight found {len(plan.problems)} problem(s); nothing was written:",
            hint="fix them, or choose with the flags each one names",
            details=tuple(plan.problems),
        )
    return plan


def install(api: cluster.Api, plan: preflight.Plan, dry_run: DryRun = "none") -> list[Outcome]:
    """Replace what `plan` replaces, apply the bundle, then drop what an earlier mode left."""
    live = read(api, {"kind": "Namespace", "metadata": {"name": plan.options.namespace}})
    before = bundle.recorded(live)
    objects = bundle.render(plan.options)
    outcomes = _keep(api, objects, plan.replaces, dry_run) if plan.replaces else []
    outcomes += [_replace(api, found, dry_run) for found in plan.replaces]
    done = {(o.kind, o.namespace, o.name) for o in outcomes}
    outcomes += [
        o for o in apply(api, objects, dry_run) if (o.kind, o.namespace, o.name) not in done
    ]
    if before is not None:
        wanted = {bundle.identity(o) for o in objects}
        stale = [o for o in bundle.render(before[1]) if bundle.identity(o) not in wanted]
        outcomes += uninstall(api, stale, dry_run, clean_nodes=False)
    return outcomes


def _keep(
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


def _replace(api: cluster.Api, found: Found, dry_run: DryRun) -> Outcome:
    obj = {"kind": "DaemonSet", "metadata": {"name": found.name, "namespace": found.namespace}}
    if dry_run != "client":
        _delete(api, obj, dry_run == "server")
    log.warning("deleted %s: replaced by the bundle's device plugin", found.describe())
    return Outcome("DaemonSet", found.namespace, found.name, "deleted")


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
                _delete(api, {"kind": o.kind, "metadata": {"name": o.name,
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


def owned(obj: Mapping[str, Any]) -> Json:
    """The part of a manifest object we own (and so compare and rewrite)."""
    meta = obj.get("metadata") or {}
    mine: Json = {"metadata": {k: meta[k] for k in ("labels", "annotations") if k in meta}}
    if obj.get("kind") not in _USER_DATA_KINDS:
        mine.update({k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")})
    return mine


def owned_fields_match(live: Any, desired: Mapping[str, Any]) -> bool:
    return contains(live, owned(desired))


def contains(live: Any, want: Any) -> bool:
    """Whether `live` holds everything `want` says; fields the server adds do not count, and
    an empty value matches an absent one (the API server omits zero values)."""
    if isinstance(want, Mapping):
        if not isinstance(live, Mapping):
            return False
        return all(contains(live[k], v) if k in live else _is_empty(v) for k, v in want.items())
    if isinstance(want, list):
        if not isinstance(live, list) or len(live) != len(want):
            return False
        return all(contains(a, b) for a, b in zip(live, want, strict=True))
    return bool(live == want)


def _is_empty(value: Any) -> bool:
    return value in ("", None, False, 0) or value == {} or value == []


def merged(live: Mapping[str, Any], desired: Mapping[str, Any]) -> Json:
    """The object to PUT: the live one (resourceVersion, status, others' labels kept) with our
    fields set as the manifest says."""
    result: Json = copy.deepcopy(dict(live))
    meta = result.setdefault("metadata", {})
    for key, value in owned(desired)["metadata"].items():
        meta[key] = {**(meta.get(key) or {}), **value}
    for key, value in owned(desired).items():
        if key != "metadata":
            result[key] = copy.deepcopy(value)
    return result


def uninstall(
    api: cluster.Api, objects: list[Json], dry_run: DryRun = "none", *, clean_nodes: bool = True
) -> list[Outcome]:
    """Delete every object, last applied first; then our keys on the nodes."""
    outcomes = []
    for obj in reversed(objects):
        kind, namespace, name = bundle.identity(obj)
        if read(api, obj) is None:
            outcomes.append(Outcome(kind, namespace, name, "not found"))
            continue
        if dry_run != "client":
            _delete(api, obj, dry_run == "server")
        outcomes.append(Outcome(kind, namespace, name, "deleted"))
    if not clean_nodes:
        return outcomes
    if dry_run == "none" and any(_is_our_agent(obj) for obj in objects):
        _await_agents_gone(api)
    plugin_gone = any(_is_our_plugin(obj) for obj in objects)
    return outcomes + _clean_nodes(api, dry_run, plugin_gone)


AGENTS_GONE_TIMEOUT = 60.0


def _is_our_agent(obj: Json) -> bool:
    kind, _, name = bundle.identity(obj)
    return kind == "DaemonSet" and name == bundle.AGENT


def _await_agents_gone(api: cluster.Api, timing: Timing | None = None) -> None:
    """A running agent watches its Node: our keys removed under it are a change it acts on,
    writing some back. So the nodes are cleaned once the agent pods are gone (a bounded wait:
    after it, they are cleaned anyway, with a warning)."""
    deadline = (timing or Timing()).deadline(AGENTS_GONE_TIMEOUT)
    selector = f"{keys.APP_NAME_LABEL}={bundle.AGENT}"
    while next(api.list(cluster.path("pods"), label_selector=selector), None) is not None:
        if deadline.passed:
            log.warning(
                "agent pods still running after %gs; removing our keys from the nodes anyway "
                "(an agent may write some back before it stops)",
                AGENTS_GONE_TIMEOUT,
            )
            return
        deadline.pause()


def _is_our_plugin(obj: Json) -> bool:
    kind, _, name = bundle.identity(obj)
    return kind == "DaemonSet" and name == bundle.DEVICE_PLUGIN


def _ours(key: str, value: object, plugin_gone: bool) -> bool:
    if key.startswith(keys.PREFIX):
        return True
    return (
        plugin_gone
        and key == keys.DEVICE_PLUGIN_CONFIG_LABEL
        and str(value).startswith(keys.PER_NODE_KEY_PREFIX)
    )


def _delete(api: cluster.Api, obj: Json, dry_run: bool) -> None:
    try:
        api.delete(url_of(obj), dry_run=dry_run)
    except ClusterError as e:
        if e.status != 404:  # gone meanwhile (a namespace or CRD took it along)
            raise


def _clean_nodes(api: cluster.Api, dry_run: DryRun, plugin_gone: bool) -> list[Outcome]:
    """Remove the agent's `kubectl-gpu.io/` labels and annotations: nothing reads them now.
    With our device plugin gone, so is its ConfigMap: the per-node config labels `share`
    set (`nvidia.com/device-plugin.config=kubectl-gpu-…`) would name keys that no longer exist.
    Beside another plugin they stay: that plugin's ConfigMap still holds the keys. A device
    plugin an agent left paused (it was stopped mid-change) gets its recorded label back."""
    outcomes = []
    for node in api.list(cluster.path("nodes")):
        meta = node.get("metadata") or {}
        patch: dict[str, dict[str, str | None]] = {
            field: {k: None for k, v in (meta.get(field) or {}).items() if _ours(k, v, plugin_gone)}
            for field in ("labels", "annotations")
        }
        paused = (meta.get("annotations") or {}).get(keys.MIG_PAUSED_PLUGIN_ANNOTATION)
        if paused is not None:
            patch["labels"][keys.DEPLOY_DEVICE_PLUGIN_LABEL] = paused or "true"
        patch = {field: keys_ for field, keys_ in patch.items() if keys_}
        if not patch:
            continue
        if dry_run != "client":
            url = cluster.path("nodes", str(meta["name"]))
            api.patch(url, {"metadata": patch}, dry_run=dry_run == "server")
        outcomes.append(Outcome("Node", "", str(meta["name"]), "cleaned"))
    return outcomes
