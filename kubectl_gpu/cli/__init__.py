"""The `kubectl gpu` command line: root group, global flags, error boundary, logging.

Owns argv and the `Settings` handed to every command. Global kubectl-style flags are
accepted before and after the subcommand, as kubectl accepts them. This is the one
place that turns a `GpuError` into a message and an exit code; user mistakes never
show a traceback (unless --debug). Imports only click and the package's light modules
at module level: `--help` must not pay for the kubernetes client.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable
from typing import Any

import click

from kubectl_gpu import __version__, errors
from kubectl_gpu.cli.settings import global_options
from kubectl_gpu.errors import REPORT_BUGS, ExitCode, GpuError, printable

PROG = "kubectl gpu"


# Subcommands, loaded on first use: name -> (module, attribute, short help). The short
# help is kept here so that `kubectl gpu --help` imports no command module at all; a test
# checks it against each command's own. A command whose module is not in this
# installation is not listed (not built yet).
COMMANDS: dict[str, tuple[str, str, str]] = {
    "validate": (
        "kubectl_gpu.cli.validate",
        "validate",
        "Check device-plugin, MIG and DRA configs before they reach a node.",
    ),
    "share": (
        "kubectl_gpu.cli.share",
        "share",
        "Share GPUs by time-slicing or MPS.",
    ),
    "mig": (
        "kubectl_gpu.cli.mig",
        "mig",
        "Partition GPUs with MIG: check, apply, follow and recover layouts.",
    ),
    "map": (
        "kubectl_gpu.cli.map",
        "map_",
        "Show which pod holds which GPU, MIG device and replica.",
    ),
    "top": (
        "kubectl_gpu.cli.top",
        "top",
        "Show what each pod uses of its GPUs, and what limits it.",
    ),
    "doctor": (
        "kubectl_gpu.cli.doctor",
        "doctor",
        "Name the failing layer when a GPU pod does not run.",
    ),
    "install": (
        "kubectl_gpu.cli.install",
        "install",
        "Install the node agent and device plugin bundle.",
    ),
    "uninstall": (
        "kubectl_gpu.cli.install",
        "uninstall",
        "Remove everything `kubectl gpu install` created.",
    ),
    "status": (
        "kubectl_gpu.cli.install",
        "status",
        "Show whether every part of the install is there and Ready.",
    ),
    "version": (
        "kubectl_gpu.cli.version",
        "version",
        "Print the kubectl-gpu version.",
    ),
}


class RootGroup(click.Group):
    """The root group: lazy subcommands, and `main` as the error boundary for all of them."""

    def list_commands(self, ctx: click.Context) -> list[str]:  # noqa: D102
        from importlib.util import find_spec

        return [name for name, (module, _, _) in COMMANDS.items() if find_spec(module)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:  # noqa: D102
        if cmd_name not in self.list_commands(ctx):
            return None
        import importlib

        module, attribute, _ = COMMANDS[cmd_name]
        command: click.Command = getattr(importlib.import_module(module), attribute)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List the commands from the table, without importing their modules."""
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def main(self, *args: Any, **kwargs: Any) -> Any:  # noqa: D102 - click's signature
        kwargs.setdefault("prog_name", PROG)
        argv = list(kwargs.get("args") or (args[0] if args else None) or sys.argv[1:])
        standalone = kwargs.pop("standalone_mode", True)
        _never_unwritable()
        try:
            # errors are ours to print (kubectl style), so click must not print them itself
            run = functools.partial(super().main, *args, standalone_mode=False, **kwargs)
            code = _guarded(run, argv)
        except KeyboardInterrupt as e:  # a second Ctrl-C while the first was being reported
            code = int(errors.interrupted_code(e))
        if not standalone:
            return code
        sys.exit(code if isinstance(code, int) else 0)


def _never_unwritable() -> None:
    """A string no renderer escaped (a lone surrogate from JSON's `"\\ud800"`) is written
    escaped, never raised as UnicodeEncodeError (exit 70) half-way through the output."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")


def _guarded(run: Callable[[], Any], argv: list[str]) -> Any:
    """Run the command; turn whatever ends it into a message and an exit status. Everything
    printed here goes through `report`/`_debug`, which leave credentials out."""
    debug = "--debug" in argv
    try:
        return run()
    except GpuError as e:
        _debug(e, debug)
        report(e)
        return int(e.exit_code)
    except click.UsageError as e:
        report_usage(e)
        return e.exit_code
    except click.ClickException as e:
        report(GpuError(e.format_message()))
        return e.exit_code
    except click.Abort as e:
        cause = e.__cause__ or e.__context__
        if not isinstance(cause, KeyboardInterrupt):
            click.echo("Aborted!", err=True)  # a prompt answered "no": click's own words
            return 1
        report(interrupted(argv))
        return int(errors.interrupted_code(cause))
    except KeyboardInterrupt as e:  # outside click's own handler (a signal between its steps)
        report(interrupted(argv))
        return int(errors.interrupted_code(e))
    except Exception as e:  # noqa: BLE001 - the boundary: a bug must not look like bad input
        if _missing_dependency(e):
            raise
        _debug(e, debug)
        click.echo(internal_error(argv, e), err=True)
        return int(ExitCode.INTERNAL)


def _debug(e: BaseException, debug: bool) -> None:
    """With --debug, the traceback, on stderr, without the credentials it may quote."""
    if debug:
        import traceback

        shown = "".join(traceback.format_exception(e))
        click.echo(errors.without_secrets(shown).rstrip("\n"), err=True)


# Commands that only read: an interruption of one of them changed nothing.
_READ_ONLY = {
    "validate", "map", "top", "doctor", "status", "version",
    "share show", "mig validate", "mig plan", "mig profiles", "mig status",
}  # fmt: skip


def interrupted(argv: list[str]) -> GpuError:
    """What an interruption no workflow explained left behind: nothing, for a command that
    only reads; otherwise where to look (what was written before the signal stays)."""
    words = [a for a in argv if not a.startswith("-")][:2]
    name = " ".join(words[:2]) if words[:1] in (["share"], ["mig"]) else " ".join(words[:1])
    if name in _READ_ONLY or "--help" in argv:
        return GpuError(f"interrupted: `{PROG} {name}` only reads, so nothing was changed")
    return GpuError(
        "interrupted: what was written before the interruption stays",
        hint="`kubectl gpu share show` and `kubectl gpu mig status` show what the cluster "
        "holds now",
    )


def _missing_dependency(e: Exception) -> bool:
    """A third-party package that is not installed: the installation's problem, not a bug; the
    krew zipapp's entry point names the package and the pip command (scripts/release.py)."""
    name = getattr(e, "name", None) or ""
    return isinstance(e, ModuleNotFoundError) and name.partition(".")[0] != "kubectl_gpu"


def report(e: GpuError) -> None:
    """Print an error the way kubectl does: one line (and its details, one line each), then
    an optional hint. Each line is made printable on its own: no text can start a line; no
    credential this process holds (or any `Authorization` value, private key) is printed."""
    label = click.style("error", fg="red", bold=True)
    click.echo(f"{label}: {_shown(e.message)}", err=True)
    for detail in e.details:
        click.echo(f"  {_shown(detail)}", err=True)
    if e.hint:
        click.echo(f"hint: {_shown(e.hint)}", err=True)


def _shown(text: str) -> str:
    return printable(errors.without_secrets(str(text)))


def internal_error(argv: list[str], e: BaseException) -> str:
    """The one line printed for a bug: the command and its input, what broke, where to report.

    Exit status ExitCode.INTERNAL (70), never 1: a CI job can tell a bug from a bad file.
    The line holds no credential (`errors.without_secrets`), and it asks for the command and
    the input file, never for a kubeconfig or for output that could hold one.
    """
    import shlex

    command = shlex.join([*PROG.split(), *argv])
    return _shown(
        f"error: internal error in `{command}`: {type(e).__name__}: {e}"
        f" (kubectl-gpu {__version__}; this is a bug: please report it with this line and the"
        f" input file at {REPORT_BUGS}, never a kubeconfig or a token; add --debug for the"
        " traceback)"
    )


def report_usage(e: click.UsageError) -> None:
    """A usage mistake in kubectl's words: `error: …`, then where the usage is explained."""
    path = e.ctx.command_path if e.ctx else PROG
    report(GpuError(e.format_message(), hint=f"see '{path} --help' for usage"))


CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(cls=RootGroup, context_settings=CONTEXT)
@click.version_option(
    __version__, "--version", prog_name="kubectl-gpu", message="%(prog)s %(version)s"
)
@global_options
def cli() -> None:
    """Share, partition and map NVIDIA GPUs on Kubernetes, safely.

    \b
    Examples:
      # Check a device-plugin or MIG config before it reaches a node
      kubectl gpu validate -f time-slicing.yaml

    \b
    Exit status: 0 success, 1 failed or invalid input, 2 usage error,
    70 internal error (a bug in kubectl-gpu: please report it; --debug shows the traceback),
    130 interrupted (Ctrl-C).
    """


def main() -> None:
    """Console-script entry point (`kubectl-gpu`, found by kubectl as `kubectl gpu`)."""
    cli.main()
