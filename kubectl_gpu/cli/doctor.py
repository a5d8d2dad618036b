"""`kubectl gpu doctor [POD]`: the failing layer of a GPU pod, or the cluster's GPU health.

Owns the command's argv and rendering: a table (LAYER, SEVERITY, OBJECT, FINDING, FIX; EVIDENCE
with `-o wide`) or the DoctorResult document (schemas/doctor-result.v1.json) with `-o json|yaml`.
Exit 1 when any diagnosis is an error, 0 otherwise (2 for usage). Must not contain rules
(kubectl_gpu.doctor) nor reads (kubectl_gpu.workflows.doctor).
"""

from __future__ import annotations

from typing import Any

import click

from kubectl_gpu.cli import render
from kubectl_gpu.cli.settings import Settings, global_options, pass_settings
from kubectl_gpu.errors import ExitCode, UsageError

COLUMNS = (
    render.Column("LAYER", lambda d: d.layer),
    render.Column("SEVERITY", lambda d: d.severity),
    render.Column("OBJECT", lambda d: d.object),
    render.Column("FINDING", lambda d: d.message),
    render.Column("FIX", lambda d: d.fix),
    render.Column("EVIDENCE", lambda d: " | ".join(d.evidence), wide_only=True),
)


@click.command("doctor", short_help="Name the failing layer when a GPU pod does not run.")
@click.argument("pod_name", metavar="[POD]", required=False)
@global_options
@pass_settings
def doctor(settings: Settings, pod_name: str | None) -> None:
    """Name the layer where a GPU pod fails (admission, scheduler, dra, kubelet, runtime,
    driver), with the evidence and the fix. For a pod with ResourceClaims the dra layer names
    the selector clause no published device satisfies, or why the driver could not prepare it.
    Without POD, check the GPU health of every node. POD is NAME, pod/NAME or NAMESPACE/NAME;
    without a namespace it is looked up in -n, else the kubeconfig context's namespace (as
    kubectl does).

    Evaluating DRA selectors needs cel-python, which the krew archive cannot carry (it needs
    the compiled google-re2 and pendulum): install it with
    python3 -m pip install --user 'cel-python>=0.5,<1'. Without it the dra layer says so and
    checks everything else. Functions only Kubernetes' CEL has (semver, quantity, ...) are
    reported as not evaluable here, never guessed.

    Exits 1 when an error is found.

    \b
    Examples:
      # Why is this pod Pending / not getting its GPU?
      kubectl gpu doctor train-0 -n ml
      # Unhealthy GPUs, nodes advertising nothing, invalid MIG layouts, missing taints
      kubectl gpu doctor -o wide
    """
    from kubectl_gpu import cluster
    from kubectl_gpu.workflows.doctor import diagnosis as workflow

    api = cluster.connect(settings.kubeconfig, settings.context)
    if pod_name:
        namespace, name = _pod_ref(pod_name, settings.namespace)
        result = workflow.pod(api, namespace or api.namespace, name)
    else:
        result = workflow.cluster_health(api)
    _render(result, settings)
    click.get_current_context().exit(int(ExitCode.ERROR if result.failed else ExitCode.OK))


_POD_TYPES = ("pod", "pods", "po")


def _pod_ref(text: str, namespace: str | None) -> tuple[str | None, str]:
    """POD as kubectl users type it: NAME, pod/NAME (kubectl's TYPE/NAME) or NS/NAME."""
    head, slash, name = text.partition("/")
    if not slash:
        return namespace, text
    if not head or not name or "/" in name:
        raise UsageError(f"{text!r} is not a pod: give NAME, pod/NAME or NAMESPACE/NAME")
    if head in _POD_TYPES:
        return namespace, name
    if namespace and namespace != head:
        raise UsageError(f"{text!r} names namespace {head}, but -n says {namespace}")
    return head, name


def _render(result: Any, settings: Settings) -> None:
    if render.is_data(settings.output) or result.diagnoses:
        render.emit_table(
            result.diagnoses, COLUMNS, settings.output, result.document(), name=lambda d: d.object
        )
    else:
        click.echo("No GPU problems found.", err=True)
    if settings.output in ("table", "wide"):
        errors = sum(d.severity == "error" for d in result.diagnoses)
        warnings = sum(d.severity == "warning" for d in result.diagnoses)
        click.echo(f"{errors} error(s), {warnings} warning(s)", err=True)
