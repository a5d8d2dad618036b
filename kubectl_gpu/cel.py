"""CEL, for DRA device selectors: the only module that imports `celpy` (cel-python).

Owns compiling an expression once and evaluating it against one device as the DRA
environment presents it (`device.driver`, `device.attributes[domain].name`,
`device.capacity[domain].name`, `device.allowMultipleAllocations`), and turning cel-python's
errors into `SelectorError` with its message. Kubernetes-only extensions (`semver`,
`quantity`) are not available here: an expression using them is reported as unevaluable,
never guessed. Imported only by the workflows that need it (doctor), so `--help` and offline
commands never load it. Must not decide anything.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from kubectl_gpu.doctor.dra import SelectorError


def matches(expression: str, device: Mapping[str, Any]) -> bool:
    """Whether `device` (plain data) satisfies the selector; SelectorError when it cannot be
    compiled or evaluated (a missing attribute is a runtime error, as in Kubernetes)."""
    program = _program(expression)
    try:
        result = program.evaluate({"device": json_to_cel(dict(device))})
    except CELEvalError as e:
        raise SelectorError(_message(e)) from e
    if isinstance(result, CELEvalError):
        raise SelectorError(_message(result))
    if not isinstance(result, celtypes.BoolType):
        raise SelectorError(f"the expression gives {type(result).__name__}, not a bool")
    return bool(result)


@functools.lru_cache(maxsize=256)
def _program(expression: str) -> Any:
    environment = celpy.Environment()
    try:
        return environment.program(environment.compile(expression))
    except CELParseError as e:
        raise SelectorError(f"cannot parse: {e}") from e
    except Exception as e:  # cel-python raises plain exceptions for unknown functions
        raise SelectorError(f"cannot compile: {e}") from e


def _message(error: BaseException) -> str:
    detail = error.args[0] if error.args else error
    return str(detail)
