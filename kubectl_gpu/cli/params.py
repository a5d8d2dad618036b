"""click parameter types and options shared by commands: kubectl-style values.

Owns the parsing of option values users type the way kubectl takes them, and the options
more than one command takes (`--stuck-after`, `--dry-run`). Must not
read files or talk to a cluster.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


class Duration(click.ParamType):  # type: ignore[type-arg]  # generic only in click>=8.2 stubs
    """kubectl-style durations: `90s`, `5m`, `1h30m`, `500ms`, or plain seconds."""

    name = "duration"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        text = str(value).strip()
        if re.fullmatch(r"\d+(\.\d+)?", text):
            return float(text)
        parts = _DURATION.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            self.fail(f"{value!r} is not a duration such as 90s, 5m or 1h30m", param, ctx)
        return sum(float(n) * _UNITS[u] for n, u in parts)


# `--stuck-after`, taken by `mig status` and `mig recover` alike.
stuck_after_option = click.option(
    "--stuck-after",
    type=Duration(),
    default="30m",
    show_default=True,
    help="A change pending longer than this counts as stuck.",
)


def dry_run_option(meaning: str) -> Callable[[F], F]:
    """kubectl's `--dry-run[=none|client|server]` (a bare `--dry-run` is `client`), defined
    once for every command that writes; `meaning` says what it does for that command."""
    return click.option(
        "--dry-run",
        type=click.Choice(["none", "client", "server"]),
        default="none",
        is_flag=False,
        flag_value="client",
        help=meaning,
    )
