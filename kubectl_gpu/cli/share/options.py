"""The flags `kubectl gpu share` and its subcommands share: scope, rollout and request.

Owns the option decorators (each subcommand takes the groups it needs) and the reading of
repeatable, comma-separated node names. Must not import anything heavier than click.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from kubectl_gpu.cli import params
from kubectl_gpu.cli.params import Duration

F = Callable[..., Any]


def scope_options(f: F) -> F:
    f = click.option(
        "-l",
        "--selector",
        default="",
        metavar="SELECTOR",
        help="Change only the nodes matching this label selector (they get a key of their own).",
    )(f)
    return click.option(
        "--node",
        "nodes",
        multiple=True,
        metavar="NAME",
        help="Change only this node (repeatable; comma-separated names allowed).",
    )(f)


def rollout_options(f: F) -> F:
    options = (
        params.dry_run_option(
            "Change nothing; say what the change would do: each node's capacity before "
            "and after, the running pods that would lose their GPU, and the ConfigMap keys "
            "and node labels it would write (client: checked here; server: the API server "
            "checks the objects too)."
        ),
        click.option(
            "--diff",
            is_flag=True,
            help="Print a unified diff of the ConfigMap and the label/ClusterPolicy "
            "changes, and write nothing.",
        ),
        click.option(
            "--no-restart",
            is_flag=True,
            help="Do not restart the device plugin (it reads changed keys only at start).",
        ),
        click.option(
            "--wait",
            is_flag=True,
            help="Wait until every node's allocatable is physical GPUs x replicas.",
        ),
        click.option(
            "--timeout",
            type=Duration(),
            default="5m",
            show_default=True,
            help="How long to wait for each restart batch, and for --wait.",
        ),
        click.option(
            "--max-unavailable",
            type=click.IntRange(min=1),
            metavar="N",
            default=1,
            show_default=True,
            help="How many nodes' plugins restart at a time (each GPU model's first node "
            "restarts first and proves the config for that model).",
        ),
        click.option(
            "--configmap",
            metavar="NAME",
            help="The device plugin's ConfigMap, instead of the one detected.",
        ),
        click.option(
            "--drain",
            is_flag=True,
            help="Cordon each node whose pods lose their resource, evict them (honouring "
            "PodDisruptionBudgets), restart, wait for the capacity, uncordon.",
        ),
        click.option(
            "--drain-timeout",
            type=Duration(),
            default="5m",
            show_default=True,
            help="How long an eviction may keep being refused before the rollout stops.",
        ),
        click.option(
            "--force",
            is_flag=True,
            help="Change capacity although running pods use a resource that shrinks or goes "
            "(with --drain: evict pods no controller recreates); overwrite a node's config "
            "label or the ClusterPolicy's config edited since kubectl gpu last wrote it; "
            "rollback: discard a hand edit made since the change it undoes.",
        ),
        click.option(
            "--yes",
            is_flag=True,
            help="Go on although the change restarts the device plugin on nodes it does not "
            "select (a ClusterPolicy change: the GPU Operator rolls its DaemonSet over every "
            "GPU node); without it such a change is refused, naming them.",
        ),
    )
    for option in reversed(options):
        f = option(f)
    return f


def request_options(f: F) -> F:
    options = (
        click.option("--replicas", type=int, metavar="N", help="Replicas per GPU (2 or more)."),
        click.option(
            "--resource",
            default="nvidia.com/gpu",
            show_default=True,
            help="The resource to share, e.g. nvidia.com/mig-1g.10gb.",
        ),
        click.option("--mps", is_flag=True, help="Share with MPS instead of time-slicing."),
        click.option(
            "--rename-by-default/--no-rename-by-default",
            default=None,
            help="Advertise shared GPUs as <resource>.shared.",
        ),
        click.option(
            "--fail-requests-greater-than-one/--no-fail-requests-greater-than-one",
            default=None,
            help="Reject pods asking for more than one replica.",
        ),
        click.option(
            "--key",
            metavar="KEY",
            help="The ConfigMap key to write, instead of the default or a per-node one.",
        ),
    )
    for option in reversed(options):
        f = option(f)
    return f


def names(given: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(n.strip() for item in given for n in item.split(",") if n.strip())
