"""The names of the ConfigMap keys a per-node change writes: `kubectl-gpu-ts-4`, `…-mps-2`.

Owns the choice of a node's key: its current key when that already holds the content, else an
existing key with the same parsed content (never the default key), else a name said by the
content, made unique by a short digest of it when taken. Must not decide what the content is
(targets does). Pure.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from kubectl_gpu import keys
from kubectl_gpu.sharing import model, names
from kubectl_gpu.sharing.rollout.nodes import GpuNode
from kubectl_gpu.sharing.rollout.plan import KeyChange
from kubectl_gpu.sharing.rollout.request import MAX_LABEL_VALUE
from kubectl_gpu.sharing.rollout.state import ClusterState, Doc


def key_for(
    state: ClusterState, changes: Mapping[str, KeyChange], doc: Doc, node: GpuNode, resource: str
) -> str:
    """Reuse a key with this content (never the default key), else a deterministic name."""
    default_key = state.deployment.default_key
    docs: dict[str, Doc] = {**state.configmap.docs, **{k: c.doc for k, c in changes.items()}}
    current = node.config_label
    if current and current != default_key and current in docs and docs[current] == doc:
        return current
    same = sorted(k for k, d in docs.items() if d == doc and k != default_key)
    name = key_name(doc, resource)
    if name in same or (same and name not in docs):
        return name if name in same else same[0]
    if name not in docs and name not in state.configmap.texts:
        return name
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:6]
    return f"{name[: MAX_LABEL_VALUE - 7]}-{digest}"


def key_name(doc: Doc, resource: str) -> str:
    """`kubectl-gpu-ts-4`, `kubectl-gpu-mps-2`, `kubectl-gpu-ts-4-mig-1g.10gb-shared`, `…-off`."""
    config = model.DevicePluginConfig.from_dict(doc)
    sharing = config.sharing
    shared = (
        None
        if sharing is None
        else next((r for r in sharing.resources if r.name == resource), None)
    )
    if sharing is None or shared is None or config.strategy == "none":
        return keys.PER_NODE_KEY_PREFIX + "off"
    parts = ["ts" if sharing.strategy == "time-slicing" else "mps", str(shared.replicas)]
    if resource != names.DEFAULT_RESOURCE:
        parts.append(resource.removeprefix(names.RESOURCE_PREFIX))
    if sharing.rename_by_default:
        parts.append("shared")
    name = keys.PER_NODE_KEY_PREFIX + "-".join(parts)
    return name[:MAX_LABEL_VALUE].rstrip("-_.")
