"""`kubectl gpu version`: the plugin's version, as `kubectl version --client` prints its own.

Owns nothing but the wording; reads no cluster (the installed agent's version is in
`kubectl gpu status`).
"""

from __future__ import annotations

import click

from kubectl_gpu import __version__
from kubectl_gpu.cli import render
from kubectl_gpu.cli.settings import Settings, global_options, pass_settings


@click.command("version", short_help="Print the kubectl-gpu version.")
@global_options
@pass_settings
def version(settings: Settings) -> None:
    """Print the kubectl-gpu version (`kubectl gpu status` shows the installed agent's).

    \b
    Examples:
      kubectl gpu version
      kubectl gpu version -o json
    """
    if render.is_data(settings.output):
        document = {
            "apiVersion": render.API_VERSION,
            "kind": "Version",
            "clientVersion": {"gitVersion": __version__},
        }
        render.emit_table([], (), settings.output, document)
        return
    click.echo(f"kubectl-gpu {__version__}")
