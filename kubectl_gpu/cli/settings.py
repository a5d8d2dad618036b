"""Global flags, kubectl style, and the frozen `Settings` commands receive.

kubectl accepts its global flags anywhere on the command line, so each flag is
declared on the root group and on every command; whichever occurrence is seen last
wins. Values collect in the root context's `meta` and become one frozen `Settings`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from kubectl_gpu import errors, numbers

F = TypeVar("F", bound=Callable[..., Any])
_META = "kubectl_gpu.flags"
OUTPUTS = ("table", "wide", "json", "yaml", "name")
JSONPATH = "jsonpath="  # -o jsonpath=TEMPLATE, as kubectl takes it


@dataclasses.dataclass(frozen=True)
class Settings:
    """What every command may need to know about how it was invoked."""

    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    output: str = "table"
    verbosity: int = 0
    debug: bool = False
    no_headers: bool = False


class _Level(click.ParamType):  # type: ignore[type-arg]  # generic only in click>=8.2 stubs
    """kubectl's `-v=4`: accept the `=` that click would otherwise pass through."""

    name = "level"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        level = numbers.whole(str(value).lstrip("="))
        if level is None:
            self.fail(f"{value!r} is not a log level (0-9)", param, ctx)
        return level


class _Output(click.ParamType):  # type: ignore[type-arg]  # generic only in click>=8.2 stubs
    """kubectl's -o: a format name, or jsonpath=TEMPLATE."""

    name = "format"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        if text in OUTPUTS or (text.startswith(JSONPATH) and len(text) > len(JSONPATH)):
            return text
        self.fail(
            f"unable to match a printer suitable for the output format {text!r}, the allowed "
            f"formats are: {', '.join(OUTPUTS)}, {JSONPATH}TEMPLATE",
            param,
            ctx,
        )


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    if value is None or value is False:
        return
    ctx.find_root().meta.setdefault(_META, {})[param.name] = value


_OPTIONS = (
    click.option("--kubeconfig", metavar="PATH", help="Path to the kubeconfig file to use."),
    click.option("--context", metavar="NAME", help="The kubeconfig context to use."),
    click.option("-n", "--namespace", metavar="NS", help="The namespace to use."),
    click.option(
        "-o",
        "--output",
        type=_Output(),
        metavar="FORMAT",
        help="Output format: table|wide|json|yaml|name|jsonpath=TEMPLATE.",
    ),
    click.option(
        "--no-headers",
        is_flag=True,
        default=None,
        help="Print tables without their header line.",
    ),
    click.option(
        "-v",
        "--v",
        "verbosity",
        type=_Level(),
        metavar="LEVEL",
        help="Log level for progress on stderr (1: info, 4: debug).",
    ),
    click.option("--debug", is_flag=True, default=None, help="Show tracebacks for errors."),
)


def global_options(f: F) -> F:
    """Declare the global flags on a command or group."""
    for option in reversed(_OPTIONS):
        f = option(f)
    params = getattr(f, "__click_params__", [])
    for p in params[-len(_OPTIONS) :]:
        p.expose_value = False
        p.callback = _remember
    return f


def current(ctx: click.Context) -> Settings:
    """The settings given so far on the command line (root and subcommand flags)."""
    given = ctx.find_root().meta.get(_META, {})
    return Settings(**given)


def pass_settings(f: Callable[..., Any]) -> Callable[..., Any]:
    """Like click.pass_obj, but hands the command its `Settings`."""

    @click.pass_context
    def wrapper(ctx: click.Context, *args: Any, **kwargs: Any) -> Any:
        settings = current(ctx)  # every flag is parsed by now, wherever it was given
        configure_logging(settings.verbosity)
        return ctx.invoke(f, settings, *args, **kwargs)

    return functools.update_wrapper(wrapper, f)


def configure_logging(verbosity: int) -> None:
    """Progress and warnings go to stderr through logging; `-v` raises the detail."""
    import logging
    import sys

    level = logging.DEBUG if verbosity >= 4 else logging.INFO if verbosity >= 1 else logging.WARNING

    class Redacting(logging.Formatter):
        """A log line, at any level, never holds a credential this process knows of."""

        def format(self, record: logging.LogRecord) -> str:
            text = errors.without_secrets(super().format(record))
            return "\n".join(errors.printable(line) for line in text.split("\n"))

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(Redacting("%(message)s"))
    root = logging.getLogger("kubectl_gpu")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
