"""`kubectl gpu mig`: partition GPUs with MIG, offline and on the cluster.

Owns the `mig` group and the one place its subcommands are registered: each lives in a module
of its own (`profiles`; `validate` with `plan`; `apply` with `status`; `recover`) that defines a
plain click command and never imports this module, so the registration below is the only
edge between them. Every command module imports only click and light modules at load time:
`kubectl gpu mig --help` must not pay for the kubernetes client.
"""

from __future__ import annotations

import click

from kubectl_gpu.cli.mig import apply, profiles, recover, validate


@click.group(short_help="Partition GPUs with MIG: check, apply, follow and recover layouts.")
def mig() -> None:
    """Partition GPUs with MIG. Offline: the profiles of each GPU model (profiles), whether a
    mig-parted config fits (validate) and the layout it gives (plan). On the cluster: apply a
    config to nodes (apply; the node agent or the GPU Operator's MIG manager changes the GPUs),
    follow where each node stands (status), and bring back a node whose change is stuck
    (recover).

    \b
    Examples:
      kubectl gpu mig profiles --gpu H100-80GB
      kubectl gpu mig validate -f config.yaml -c all-balanced --gpu "NVIDIA H100 80GB HBM3"
      kubectl gpu mig plan -f config.yaml -c all-balanced --node gpu-node-1 --strategy mixed
      kubectl gpu mig apply -f config.yaml -c all-balanced --node gpu-node-1 --wait
      kubectl gpu mig status
    """


for command in (
    profiles.profiles_cmd,
    validate.validate_cmd,
    validate.plan_cmd,
    apply.apply_cmd,
    apply.status_cmd,
    recover.recover_cmd,
):
    mig.add_command(command)
