"""`kubectl gpu map --tree`: the map's rows drawn as node → physical GPU → device → pod.

Owns the picture of who holds what (not what they use: that is `top --tree`): per node, each
physical GPU with how many of its devices are held and free; under it its MIG devices in
placement order (the start slice the node's agent read from NVML, `@start:size`; by GPU
instance ID where the placement is unknown), its replicas `::N` in order, the whole GPU, or
the DRA device, each with the pod holding it or `free`. Drawn with `usage.tree`'s plain-ASCII
branches. Imports no cluster client.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubectl_gpu.gpumap.clustermap import MapRow
from kubectl_gpu.gpumap.rows import device_text
from kubectl_gpu.usage.tree import Branch, draw


def lines(held: Sequence[MapRow], free: Sequence[MapRow]) -> list[str]:
    """The picture of the held and the free devices, node by node."""
    nodes: dict[str, dict[str, list[tuple[MapRow, bool]]]] = {}
    for rows, taken in ((held, True), (free, False)):
        for r in rows:
            gpu = r.row.gpu_uuid or r.row.mig_uuid or r.row.device_id
            node = r.row.node or "(node unknown: --node-name names it)"
            nodes.setdefault(node, {}).setdefault(gpu, []).append((r, taken))
    out: list[str] = []
    for node in sorted(nodes):
        gpus = sorted(nodes[node].values(), key=lambda g: (_index(g[0][0]), g[0][0].row.gpu_uuid))
        out += draw(Branch(node, tuple(_gpu(g) for g in gpus)))
    return out


def _index(r: MapRow) -> int:
    return -1 if r.row.gpu_index is None else r.row.gpu_index


def _gpu(parts: list[tuple[MapRow, bool]]) -> Branch:
    first = parts[0][0].row
    name = f"GPU {'?' if first.gpu_index is None else first.gpu_index}"
    model = f" {first.gpu_model}" if first.gpu_model else ""
    uuid = f" {first.gpu_uuid[:12]}" if first.gpu_uuid else ""
    taken = sum(1 for _, t in parts if t)
    text = f"{name}{model}{uuid}: {taken} held, {len(parts) - taken} free"
    ordered = sorted(parts, key=lambda p: _order(p[0]))
    return Branch(text, tuple(_part(r, t) for r, t in ordered))


def _order(r: MapRow) -> tuple[int, int, int, str]:
    """MIG devices by placement start (else GI), then replicas, the whole GPU, DRA devices."""
    row = r.row
    replica = -1 if row.replica is None else row.replica
    if row.mig_uuid is not None:
        start = r.placement.start if r.placement else (row.gpu_instance or 0)
        return (0, start, replica, row.mig_uuid)
    return (1 if row.replica is not None else 2, replica, 0, row.device_id)


def _part(r: MapRow, taken: bool) -> Branch:
    text = device_text(r.row) or r.row.device_id
    if r.placement_text:
        text += f" @{r.placement_text}"
    if not taken:
        return Branch(f"{text} free")
    pod = f"{r.row.namespace}/{r.row.pod}" if r.row.pod is not None else r.row.pod_uid
    container = f" ({r.row.container})" if r.row.container else ""
    return Branch(text, (Branch(f"{pod}{container}"),))
