"""`kubectl gpu mig recover NODE…`: bring back a node whose MIG change is stuck.

Registered on the `mig` group by cli/mig/__init__.py. Reads the flags, calls
`workflows.mig.recover.recover` and says per node what it put back and what to do next. Exit 0
when every node was recovered, 1 when a named node is not stuck (nothing is written then).
"""

from __future__ import annotations

from typing import Any

import click

from kubectl_gpu.cli import render
from kubectl_gpu.cli.params import stuck_after_option
from kubectl_gpu.cli.render import Column
from kubectl_gpu.cli.settings import Settings, global_options, pass_settings

_COLUMNS = (
    Column("NODE", lambda r: r.node),
    Column("ACTUATOR", lambda r: r.actuator.value),
    Column(
        "RESTORED",
        lambda r: [*(f"{k}={v}" for k, v in sorted(r.restored.items())), *r.undone],
    ),
    Column("STATE", lambda r: f"{r.state_label}=failed" if r.state_label else ""),
    Column("WHY", lambda r: list(r.reasons), wide_only=True),
)


@click.command("recover")
@click.argument("nodes", nargs=-1, required=True, metavar="NODE...")
@stuck_after_option
@click.option("--force", is_flag=True, help="Recover a node although it does not look stuck.")
@global_options
@pass_settings
def recover_cmd(
    settings: Settings, nodes: tuple[str, ...], stuck_after: float, force: bool
) -> None:
    """Recover nodes whose MIG change is stuck: put the GPU Operator's nvidia.com/gpu.deploy.*
    labels back to their previous values (so the device plugin returns), set the MIG state to
    failed with the reason, and say what to do next. Nothing is changed on the GPUs.

    \b
    Examples:
      kubectl gpu mig status                 # lists stuck nodes
      kubectl gpu mig recover gpu-node-1
    """
    import datetime as dt

    from kubectl_gpu import cluster
    from kubectl_gpu.workflows.mig import recover as mig_recover

    names = tuple(n.strip() for item in nodes for n in item.split(",") if n.strip())
    api = cluster.connect(settings.kubeconfig, settings.context)
    now = dt.datetime.now(dt.timezone.utc)
    done = mig_recover.recover(api, names, now, dt.timedelta(seconds=stuck_after), force)
    render.emit_table(done, _COLUMNS, settings.output, _document(done))
    for row in done:
        render.say(f"node {row.node}: {'; '.join(row.reasons)}", err=True)
        render.say(f"  next: {row.next_step}", err=True)


def _document(done: Any) -> dict[str, Any]:
    return {
        "apiVersion": render.API_VERSION,
        "kind": "MigRecovery",
        "nodes": [
            {
                "node": r.node,
                "actuator": r.actuator.value,
                "reasons": list(r.reasons),
                "restored": dict(r.restored),
                "undone": list(r.undone),
                "state": {r.state_label: "failed"} if r.state_label else {},
                "next": r.next_step,
            }
            for r in done
        ],
    }
