"""`kubectl gpu top --tree`: the rows drawn as node → physical GPU → device → pod.

Owns the picture: per node, each physical GPU with its memory used and free and a bar; under
it the parts pods hold — MIG devices in placement order (the start slice of each GPU instance,
`@start:size` as `nvidia-smi mig -lgi` prints it; by GPU instance ID where an older agent's
reading carries no placement) and the free ones among them, time-slicing or MPS replicas
`::N` in order with the free ones marked `free`, a whole GPU, DRA devices by name — each with
its pods' memory and SM % — then processes in no pod. Plain ASCII (`+--`, `|`, `` `-- ``,
`[###.......]`) so it pipes, greps and pastes into a ticket unchanged. Pure: standard library
and sibling modules; decides nothing about the figures (view does).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from kubectl_gpu.usage import isolation, view
from kubectl_gpu.usage.readings import MigReading
from kubectl_gpu.usage.view import TopRow

BAR = 10  # characters inside the brackets: one per 10 %


@dataclasses.dataclass(frozen=True)
class Branch:
    """One line of the picture and the lines under it."""

    text: str
    children: tuple[Branch, ...] = ()


def lines(rows: Sequence[TopRow]) -> list[str]:
    """The picture of `rows` (as `workflows.top` orders them: node, GPU, its rows)."""
    nodes: dict[str, dict[str, list[TopRow]]] = {}
    for r in rows:
        nodes.setdefault(r.node, {}).setdefault(r.gpu_uuid, []).append(r)
    out: list[str] = []
    for node, gpus in nodes.items():
        out += draw(Branch(node, tuple(_gpu(g) for g in gpus.values())))
    return out


def draw(root: Branch) -> list[str]:
    """`root` and everything under it, one line each, in plain ASCII."""
    out: list[str] = []
    _draw(root, "", True, out, root=True)
    return out


def _draw(branch: Branch, prefix: str, last: bool, out: list[str], root: bool = False) -> None:
    if root:
        out.append(branch.text)
        inner = ""
    else:
        out.append(f"{prefix}{'`-- ' if last else '+-- '}{branch.text}")
        inner = prefix + ("    " if last else "|   ")
    for i, child in enumerate(branch.children):
        _draw(child, inner, i == len(branch.children) - 1, out)


def _gpu(rows: list[TopRow]) -> Branch:
    gpu = next((r for r in rows if r.kind == view.GPU), rows[0])
    held = [r for r in rows if r.kind == view.POD]
    strays = [r for r in rows if r.kind == view.NO_POD]
    devices: dict[str, list[TopRow]] = {}
    for r in held:  # a MIG device's replicas (mig-*.shared) stay under their MIG device
        key = f"gi {r.gpu_instance}" if r.gpu_instance is not None else r.device_id
        devices.setdefault(key or r.device, []).append(r)
    parts = [(_order(g[0]), _device(g)) for g in devices.values()]
    parts += [((1, n, ""), Branch(f"::{n} free")) for n in _free_replicas(held)]
    parts += [((0, _slice(m), ""), Branch(_free_mig(m))) for m in gpu.free_migs]
    children = [b for _, b in sorted(parts, key=lambda p: p[0])]
    children += [Branch(_stray(r)) for r in strays]
    if not children:
        children = [Branch("free: no pod holds it")]
    return Branch(_gpu_text(gpu), tuple(children))


def _gpu_text(gpu: TopRow) -> str:
    name = f"GPU {'?' if gpu.gpu_index is None else gpu.gpu_index}"
    model = f" {gpu.model}" if gpu.model else ""
    text = f"{name}{model} {gpu.gpu_uuid[:12]}: {_use(gpu.memory_used, gpu.memory_total)}"
    return f"{text}, SM {view.sm_text(gpu)}"


def _use(used: int | None, total: int | None) -> str:
    """`16.5Gi of 80.0Gi [##........] 63.5Gi free`, or what is known of it."""
    size = isolation.size
    if total is None or used is None:
        return f"{size(used)} used"
    free = max(total - used, 0)
    return f"{size(used)} of {size(total)} {bar(used, total)} {size(free)} free"


def bar(used: int, total: int) -> str:
    """`[###.......]`: the share used, a `#` per 10 %, rounded up so any use shows."""
    filled = 0 if total <= 0 or used <= 0 else min(BAR, -(-used * BAR // total))
    return f"[{'#' * filled}{'.' * (BAR - filled)}]"


def _order(r: TopRow) -> tuple[int, int, str]:
    """MIG devices by placement, then replicas by index, the whole GPU, DRA devices."""
    if r.mig is not None:
        return (0, _slice(r.mig), r.device)
    replica = _replica(r)
    if replica is not None:
        return (1, replica, "")
    return (2 if r.device == "gpu" else 3, 0, r.device)


def _slice(m: MigReading) -> int:
    """Where a MIG device sits on its GPU: its placement's start slice, else its GI ID."""
    if m.placement_start is not None:
        return m.placement_start
    return m.gpu_instance if m.gpu_instance is not None else 0


def _placed(m: MigReading) -> str:
    """`GI 5 @2:1`: the GPU instance and, where read, its placement (start:size)."""
    gi = "?" if m.gpu_instance is None else m.gpu_instance
    if m.placement_start is None or m.placement_size is None:
        return f"GI {gi}"
    return f"GI {gi} @{m.placement_start}:{m.placement_size}"


def _replica(r: TopRow) -> int | None:
    head, separator, index = r.device.partition("::")
    return int(index) if not head and separator and index.isdigit() else None


def _free_replicas(held: Iterable[TopRow]) -> list[int]:
    rows = list(held)
    count = max((r.replicas or 0 for r in rows if _replica(r) is not None), default=0)
    taken = {_replica(r) for r in rows}
    return [n for n in range(count) if n not in taken]


def _device(rows: list[TopRow]) -> Branch:
    first = rows[0]
    if first.mig is not None:
        used = sum(r.memory_used or 0 for r in rows)
        text = f"{first.device} {_placed(first.mig)}: {_use(used, first.memory_total)}"
    elif first.device == "gpu":
        text = "gpu (all of it)"
    else:
        text = first.device
    return Branch(text, tuple(Branch(_pod(r)) for r in rows))


def _pod(r: TopRow) -> str:
    memory = "(device's figures)" if r.copied else isolation.size(r.memory_used)
    parts = [str(r.pod_ref), memory, f"SM {view.sm_text(r)}"]
    if r.limit is not None:
        parts.append(_limit(r.limit))
    return "  ".join(parts)


def _limit(limit: isolation.Limit) -> str:
    if limit.form != isolation.NONE:
        return f"limit: {limit.text()}"
    n = len(limit.neighbours)
    return f"no isolation ({n} neighbour{'s' if n != 1 else ''})" if n else "no isolation"


def _free_mig(m: MigReading) -> str:
    return f"mig {m.profile or '?'} {_placed(m)}: free, {isolation.size(m.memory_total)}"


def _stray(r: TopRow) -> str:
    pid = r.pids[0] if r.pids else "?"
    return f"<no pod> pid {pid}  {isolation.size(r.memory_used)}  (in no pod)"
