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
import re
from collections.abc import Mapping
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from kubectl_gpu.doctor import drafacts
from kubectl_gpu.doctor.dra import SelectorError


def matches(expression: str, device: Mapping[str, Any]) -> bool:
    """Whether `device` (plain data) satisfies the selector; SelectorError when it cannot be
    compiled or evaluated (a missing attribute is a runtime error, as in Kubernetes)."""
    if _CAPACITY_VS_STRING.search(expression):
        raise SelectorError(
            "cannot compile: a capacity is a Kubernetes quantity, and == or != does not compare "
            'one with a string (Kubernetes refuses the selector); write quantity("40Gi") with '
            "compareTo"
        )
    unknown = _KUBERNETES_CALL.search(expression)
    if unknown:  # cel-python would fail on it, or, beside an error, report a misleading one
        raise SelectorError(_unevaluable(unknown.group(1)))
    program = _program(expression)
    try:
        result = program.evaluate({"device": _device(device)})
    except CELEvalError as e:
        raise SelectorError(_message(e)) from e
    if isinstance(result, CELEvalError):
        raise SelectorError(_message(result))
    if not isinstance(result, celtypes.BoolType):
        raise SelectorError(f"the expression gives {type(result).__name__}, not a bool")
    return bool(result)


def _device(device: Mapping[str, Any]) -> Any:
    """The device as Kubernetes presents it: a domain no attribute names is an empty map
    (`"x" in device.attributes["other.io"]` is false, not an error)."""
    view = {
        celtypes.StringType(key): _Domains(_cel(value))
        if key in ("attributes", "capacity") and isinstance(value, Mapping)
        else _cel(value)
        for key, value in device.items()
    }
    return celtypes.MapType(view)


def _cel(value: Any) -> Any:
    """Plain data as CEL values. celpy's json_to_cel makes a bool an int (bool is an int to
    Python), so `!device.attributes[d].migCapable` would fail; booleans go first here."""
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, drafacts.Version | drafacts.Quantity):
        return _Opaque(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    if isinstance(value, Mapping):
        return celtypes.MapType({celtypes.StringType(k): _cel(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return celtypes.ListType([_cel(v) for v in value])
    return json_to_cel(value)


class _Opaque(celtypes.StringType):
    """A semver or a quantity: Kubernetes has no `==` between one and a string (a type error,
    at compile or run time); only its own libraries' functions read them."""


class _Domains(celtypes.MapType):
    def __getitem__(self, key: Any) -> Any:
        return super().__getitem__(key) if key in self else celtypes.MapType()


_NUMBERS = (celtypes.IntType, celtypes.UintType, celtypes.DoubleType)


def _equal(a: Any, b: Any) -> Any:
    """CEL's heterogeneous equality, as cel-go has it: values of different types are unequal
    (1 == 1.0 is true), never an error; cel-python refuses `"x" == 1`."""
    for side in (a, b):
        if isinstance(side, CELEvalError):
            return side  # an error stays an error (`&&` and `||` may still absorb it)
    if type(a) is not type(b) and (isinstance(a, _Opaque) or isinstance(b, _Opaque)):
        return CELEvalError("no such overload", TypeError, ())
    if isinstance(a, celtypes.BoolType) or isinstance(b, celtypes.BoolType):
        return celtypes.BoolType(type(a) is type(b) and bool(a) == bool(b))
    if isinstance(a, _NUMBERS) and isinstance(b, _NUMBERS):
        return celtypes.BoolType(float(a) == float(b))
    if type(a) is not type(b):
        return celtypes.BoolType(False)
    try:
        return celtypes.BoolType(bool(a == b))
    except TypeError:
        return celtypes.BoolType(False)


def _not_equal(a: Any, b: Any) -> Any:
    equal = _equal(a, b)
    return equal if isinstance(equal, CELEvalError) else celtypes.BoolType(not equal)


@functools.lru_cache(maxsize=256)
def _program(expression: str) -> Any:
    environment = celpy.Environment()
    try:
        return environment.program(
            environment.compile(expression), functions={"_==_": _equal, "_!=_": _not_equal}
        )
    except CELParseError as e:
        raise SelectorError(f"cannot parse: {e}") from e
    except Exception as e:  # cel-python raises plain exceptions for unknown functions
        raise SelectorError(f"cannot compile: {e}") from e


# Functions of Kubernetes' CEL libraries (semver, quantity, strings, lists, regex, ...) that
# the DRA environment has and cel-python does not.
KUBERNETES_ONLY = frozenset(
    {
        *("semver", "isSemver", "major", "minor", "patch", "compareTo"),
        *("isGreaterThan", "isLessThan", "quantity", "isQuantity", "asInteger", "sign"),
        *("asApproximateFloat", "isInteger", "add", "sub", "charAt", "indexOf"),
        *("lastIndexOf", "lowerAscii", "upperAscii", "replace", "split", "join"),
        *("substring", "trim", "format", "quote", "find", "findAll", "sort", "isSorted"),
        *("sum", "min", "max", "indexOf", "reverse", "slice", "flatten", "distinct"),
    }
)
_UNDECLARED = re.compile(r"undeclared reference to '(\w+)'")
_CAPACITY = r"device\s*\.\s*capacity\s*\[[^\]]*\]\s*\.\s*\w+"
_CAPACITY_VS_STRING = re.compile(rf"{_CAPACITY}\s*[!=]=\s*['\"]|['\"]\s*[!=]=\s*{_CAPACITY}")
_KUBERNETES_CALL = re.compile(rf"\b({'|'.join(sorted(KUBERNETES_ONLY))})\s*\(")


def _message(error: BaseException) -> str:
    detail = str(error.args[0] if error.args else error)
    detail = detail.split(" (in activation", 1)[0]  # cel-python appends its whole environment
    missing = _UNDECLARED.search(detail)
    if missing and missing.group(1) in KUBERNETES_ONLY:
        return _unevaluable(missing.group(1))
    return detail


def _unevaluable(function: str) -> str:
    return (
        f"cannot evaluate here: '{function}' is a function of Kubernetes' CEL libraries that "
        "cel-python does not have (Kubernetes evaluates it)"
    )
