"""click parameter types shared by commands: kubectl-style values.

Owns the parsing of option values users type the way kubectl takes them. Must not
read files or talk to a cluster.
"""

from __future__ import annotations

import re
from typing import Any

import click

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
