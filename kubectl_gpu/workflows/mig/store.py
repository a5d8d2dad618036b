"""Writing a MIG request: the config into its ConfigMap, then the label on each node.

Owns the two places a config goes (the brief's contract with the agent, docs/upstream-facts.md
M3.4): our ConfigMap `kubectl-gpu/kubectl-gpu-mig-config`, one key per config name holding a
single-config mig-parted document; or the GPU Operator's MIG manager ConfigMap (named by
`ClusterPolicy.spec.migManager.config.name`, default `default-mig-parted-config`, key
`config.yaml`), where our config name is added only when absent or identical. Every ConfigMap
write is a read-modify-write on `resourceVersion`, retried on 409. `dry_run` "client" writes
nothing and returns the objects; "server" sends them with `dryRun=All`. `put` and `ask` choose,
per node's actuator, where the config goes and which label asks for it. Must not validate
configs (the workflow did) nor wait.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable
from typing import Any

from kubectl_gpu import cluster, keys
from kubectl_gpu.errors import ClusterError, GpuError
from kubectl_gpu.mig.actuators import Actuator
from kubectl_gpu.workflows.mig.request import ApplyRequest
from kubectl_gpu.workflows.mig.targets import NodeFacts

log = logging.getLogger(__name__)
Json = dict[str, Any]
Edit = Callable[[dict[str, str]], "dict[str, str] | None"]  # new data, or None: unchanged
OPERATOR_CONFIGMAP = "default-mig-parted-config"  # shipped default (docs/upstream-facts.md M3.5)
_ATTEMPTS = 5
MAX_CONFIG_CHARS = 1024 * 1024  # a ConfigMap holds at most 1 MiB
_OPERATOR_APPS = ("nvidia-device-plugin-daemonset", "gpu-feature-discovery", "nvidia-mig-manager")


def document_text(name: str, specs: list[Any]) -> str:
    """The single-config mig-parted document stored under `name` (stable text: same specs,
    same request key)."""
    return json.dumps({"version": "v1", "mig-configs": {name: specs}}, indent=2) + "\n"


def operator_configmap(policies: list[Json]) -> str:
    """The ConfigMap the operator's MIG manager reads its configs from."""
    for policy in policies:
        config = ((policy.get("spec") or {}).get("migManager") or {}).get("config") or {}
        if config.get("name"):
            return str(config["name"])
    return OPERATOR_CONFIGMAP


def store_ours(api: cluster.Api, namespace: str, name: str, text: str, dry_run: str) -> Json | None:
    """Put `text` under key `name` of our ConfigMap (and our namespace if missing)."""
    if not _ensure_namespace(api, namespace, dry_run) and dry_run == "server":
        dry_run = "client"  # the server cannot check a ConfigMap in a namespace it has not kept

    def edit(data: dict[str, str]) -> dict[str, str] | None:
        return None if data.get(name) == text else {**data, name: text}

    return update_configmap(api, namespace, keys.MIG_CONFIGMAP, edit, dry_run)


def operator_edit(name: str, specs: list[Any], where: str) -> Edit:
    """Add config `name` to the operator's `config.yaml`, unless another one has that name."""

    def edit(data: dict[str, str]) -> dict[str, str] | None:
        import yaml

        text = data.get(keys.MIG_PARTED_CONFIG_KEY) or ""
        if len(text) > MAX_CONFIG_CHARS:
            raise GpuError(f"{where} key {keys.MIG_PARTED_CONFIG_KEY} is larger than 1 MiB")
        doc = yaml.safe_load(text) if text.strip() else None
        doc = doc if isinstance(doc, dict) else {"version": "v1"}
        configs = doc.get("mig-configs")
        configs = configs if isinstance(configs, dict) else {}
        if name in configs and configs[name] == specs:
            return None
        if name in configs:
            raise GpuError(
                f"{where} already has a different config named {name}; not overwriting it",
                hint="give your config another name in the file and apply that name with -c",
            )
        doc["mig-configs"] = {**configs, name: specs}
        dumped = yaml.safe_dump(doc, sort_keys=False)
        return {**data, keys.MIG_PARTED_CONFIG_KEY: dumped}

    return edit


def update_configmap(
    api: cluster.Api, namespace: str, name: str, edit: Edit, dry_run: str
) -> Json | None:
    """Read-modify-write a ConfigMap (created when missing); the object written, or None when
    nothing changed."""
    url = cluster.path("configmaps", name, namespace)
    for _ in range(_ATTEMPTS):
        current = _get(api, url)
        data = dict((current or {}).get("data") or {})
        changed = edit(data)
        if changed is None:
            return None
        body = _configmap(namespace, name, current, changed)
        if dry_run == "client":
            return body
        try:
            if current is None:
                return api.create(cluster.path("configmaps", namespace=namespace), body,
                                  dry_run=dry_run == "server")  # fmt: skip
            return api.replace(url, body, dry_run=dry_run == "server")
        except ClusterError as e:
            if e.status != 409:  # 409: changed or created meanwhile; read it again
                raise
    raise GpuError(f"ConfigMap {namespace}/{name} kept changing while it was written; try again")


def label_node(
    api: cluster.Api, node: str, labels: dict[str, str | None], notes: dict[str, str | None],
    dry_run: str,
) -> Json:  # fmt: skip
    """Patch a node's labels and annotations; the object as a dry run shows it."""
    body: Json = {"metadata": {"labels": labels}}
    if notes:
        body["metadata"]["annotations"] = notes
    if dry_run != "client":
        api.patch(cluster.path("nodes", node), body, dry_run=dry_run == "server")
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, **body["metadata"]}}


def _configmap(namespace: str, name: str, current: Json | None, data: dict[str, str]) -> Json:
    if current is None:
        meta: Json = {"name": name, "namespace": namespace}
        if name == keys.MIG_CONFIGMAP:
            meta["labels"] = {keys.MANAGED_BY_LABEL: keys.MANAGED_BY_VALUE}
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}
    body = copy.deepcopy(current)  # keeps metadata.resourceVersion: a stale write gets 409
    body["data"] = data
    body.setdefault("apiVersion", "v1")
    body.setdefault("kind", "ConfigMap")
    return body


def _ensure_namespace(api: cluster.Api, namespace: str, dry_run: str) -> bool:
    """Create the namespace when missing; True when it exists (before this dry run)."""
    if _get(api, cluster.path("namespaces", namespace)) is not None:
        return True
    if dry_run == "client":
        return False
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    try:
        api.create(cluster.path("namespaces"), body, dry_run=dry_run == "server")
    except ClusterError as e:
        if e.status != 409:  # created meanwhile
            raise
    return dry_run == "none"


def _get(api: cluster.Api, url: str) -> Json | None:
    try:
        return api.get(url)
    except ClusterError as e:
        if e.status == 404:
            return None
        raise


# ---- a request, per actuator ---------------------------------------------------------------


def put(
    api: cluster.Api,
    request: ApplyRequest,
    facts: list[NodeFacts],
    content: tuple[str, str, list[Any]],
    policies: list[Json],
) -> list[Json]:
    """The config where each of these nodes' actuators reads it."""
    text, _, raw = content
    written: list[Json | None] = []
    if any(f.actuator is Actuator.AGENT for f in facts):
        namespace = request.namespace or keys.NAMESPACE
        written.append(store_ours(api, namespace, request.config, text, request.dry_run))
    if any(f.actuator is Actuator.OPERATOR for f in facts):
        namespace = request.namespace or _operator_namespace(api)
        name = operator_configmap(policies)
        edit = operator_edit(request.config, raw, f"ConfigMap {namespace}/{name}")
        written.append(update_configmap(api, namespace, name, edit, request.dry_run))
        if request.force:
            log.warning(
                "--force applies to kubectl gpu's agent only; the MIG manager has no such check"
            )
    return [o for o in written if o is not None]


def ask(api: cluster.Api, facts: NodeFacts, request: ApplyRequest, key: str) -> Json:
    """Set the request label on one node, as its actuator reads it."""
    if facts.actuator is Actuator.OPERATOR:
        return _request_operator(api, facts, request)
    return _request_ours(api, facts, request, key)


def _request_ours(api: cluster.Api, facts: NodeFacts, request: ApplyRequest, key: str) -> Json:
    notes: dict[str, str | None] = {keys.MIG_FORCE_ANNOTATION: key} if request.force else {}
    labels: dict[str, str | None] = {keys.MIG_DESIRED_LABEL: request.config}
    log.info("node %s: asking kubectl gpu's agent for %s", facts.name, key)
    return label_node(api, facts.name, labels, notes, request.dry_run)


def _request_operator(api: cluster.Api, facts: NodeFacts, request: ApplyRequest) -> Json:
    """The MIG manager acts on a *change* of its label: the same name again goes through ""
    first (mig-parted#108); the old state label goes, so that a wait sees the new one."""
    if facts.labels.get(keys.MIG_CONFIG_LABEL) == request.config:
        label_node(api, facts.name, {keys.MIG_CONFIG_LABEL: ""}, {}, request.dry_run)
    labels: dict[str, str | None] = {
        keys.MIG_CONFIG_LABEL: request.config,
        keys.MIG_CONFIG_STATE_LABEL: None,
    }
    log.info("node %s: asking the GPU Operator's MIG manager for %s", facts.name, request.config)
    return label_node(api, facts.name, labels, {}, request.dry_run)


def _operator_namespace(api: cluster.Api) -> str:
    for daemonset in api.list(cluster.path("daemonsets")):
        meta = daemonset.get("metadata") or {}
        template = ((daemonset.get("spec") or {}).get("template") or {}).get("metadata") or {}
        apps = {(meta.get("labels") or {}).get("app"), (template.get("labels") or {}).get("app")}
        if apps & set(_OPERATOR_APPS):
            return str(meta.get("namespace", ""))
    raise GpuError(
        "cannot find the GPU Operator's namespace (no device plugin or GFD DaemonSet of it)",
        hint="name the operator's namespace with -n",
    )
