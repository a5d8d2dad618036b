"""`kubectl gpu share`: share GPUs by time-slicing or MPS, prove it, show it, undo it.

Owns the `share` group (itself a command: `kubectl gpu share --replicas N`) and the one place
its subcommands are registered: `change` (the group's body, `off`, `rollback`), `show`, with
the flags they share in `options` and the rendering of a change in `result`. The command
modules never import this one. Imports only click and light modules at load time: `--help`
must not pay for the kubernetes client.
"""

from __future__ import annotations

from typing import Any

import click

from kubectl_gpu.cli.settings import Settings, global_options, pass_settings
from kubectl_gpu.cli.share import change, show
from kubectl_gpu.cli.share.options import request_options, rollout_options, scope_options
from kubectl_gpu.errors import UsageError


@click.group(invoke_without_command=True, short_help="Share GPUs by time-slicing or MPS.")
@request_options
@scope_options
@rollout_options
@global_options
@pass_settings
def share(settings: Settings, **flags: Any) -> None:
    """Share GPUs by time-slicing or MPS: validate, write, restart, and prove it.

    Without --node/-l the change is cluster-wide (the key unlabelled nodes read); with them,
    the selected nodes get a key of their own through the nvidia.com/device-plugin.config label.
    The previous config is kept for `kubectl gpu share rollback`.

    \b
    Examples:
      kubectl gpu share --replicas 4 --wait
      kubectl gpu share --replicas 2 --mps --node gpu-a --diff
      kubectl gpu share show
      kubectl gpu share off -l pool=inference --wait
    """
    ctx = click.get_current_context()
    if ctx.invoked_subcommand is not None:
        return
    if flags["replicas"] is None:
        raise UsageError("missing --replicas", hint="or use `kubectl gpu share show|off|rollback`")
    change.run(settings, flags, replicas=flags["replicas"])


for command in (change.off, change.rollback_cmd, show.show):
    share.add_command(command)
