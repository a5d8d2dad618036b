"""Why upstream refused a file, as a class, and which of `validate`'s error codes stand for it.

Comparing verdicts alone lets `validate` refuse a file for the wrong reason (a type error
reported where the plugin fails on its replica count) and still "agree". Each upstream failure
falls into one class by its message; each error code of ours names the classes it can stand
for. A refused file agrees only when one of our errors stands for upstream's class.
"""

from __future__ import annotations

import re
from typing import Any

# Upstream's message -> class, first match wins (the device plugin and mig-parted alike).
_UPSTREAM = (
    ("yaml", r"error converting YAML to JSON|yaml: "),
    ("version", r"unknown version|missing 'version' field"),
    ("type", r"cannot unmarshal|invalid duration|invalid deviceListStrategy|time: "),
    (
        "entry",
        r"replicas must be|no resources specified|no replicas specified|no resource name"
        r"|devices set as|unsupported type for device|unrecognized type for devices"
        r"|resource name|resources must have",
    ),
    ("mps-cap", r"maximum allowed replicas exceeded"),
    ("flags", r"unable to validate flags"),
    (
        "mig-spec",
        r"unexpected field|missing required field|at least one entry|invalid string input"
        r"|MIG devices included|error validating values|\(.*, .*\)",
    ),
)

# Our error code -> the upstream classes it stands for.
STANDS_FOR: dict[str, frozenset[str]] = {
    code: frozenset(classes.split())
    for code, classes in {
        "yaml.syntax": "yaml",
        "yaml.complex-key": "yaml",
        "yaml.null-key": "yaml",
        "yaml.not-json": "yaml",
        "yaml.too-complex": "yaml",
        "yaml.bad-scalar": "type yaml",
        "yaml.tag-makes-string": "type",
        # a stray BOM makes Go misread the file: whatever it then says stands for it
        "yaml.stray-bom": "yaml version type entry flags mig-spec mps-cap",
        "yaml.number-too-large": "type",
        "yaml.sexagesimal-number": "type",
        "schema.wrong-type": "type mig-spec entry",
        "schema.bad-value": "type entry flags mig-spec version",
        "schema.missing-field": "entry mig-spec version",
        "schema.unknown-field": "mig-spec",
        "schema.wrong-case": "mig-spec",
        "schema.misplaced-field": "mig-spec",
        "sharing.unknown-version": "version",
        "sharing.replicas-out-of-range": "type",
        "sharing.replicas-too-low": "entry",
        "sharing.no-resources": "entry type",
        "sharing.bad-devices": "entry type",
        "sharing.resource-name-format": "entry",
        "sharing.resource-name-too-long": "entry",
        "sharing.resource-name-prefix": "entry",
        "sharing.mps-too-many-replicas": "mps-cap",
        "sharing.mps-root-missing": "flags",
        "sharing.mps-with-mixed-mig": "flags",
        "sharing.imex-channel-ids": "flags",
        "sharing.device-list-comma": "flags",
        "sharing.bad-sleep-interval": "type",
        "mig.unknown-version": "version",
        "mig.missing-mig-devices": "mig-spec",
        "mig.devices-when-disabled": "mig-spec",
        "mig.bad-profile-format": "mig-spec",
        "mig.all-counts-zero": "mig-spec",
        "mig.count-cannot-fit": "type mig-spec",
        "mig.zero-count": "mig-spec",
    }.items()
}
_FLAG_CODES = re.compile(r"sharing\.(unknown|invalid|bad)-")  # one per validateFlags option


def upstream_class(verdict: dict[str, Any]) -> str:
    message = str(verdict.get("error", ""))
    for name, pattern in _UPSTREAM:
        if re.search(pattern, message):
            return name
    return "other"


def classes_of(code: str) -> frozenset[str]:
    if code in STANDS_FOR:
        return STANDS_FOR[code]
    if _FLAG_CODES.match(code):
        return frozenset({"flags", "version"} if code.endswith("-version") else {"flags"})
    return frozenset()


def stands_for(codes: list[str], wanted: str) -> bool:
    """True when one of `codes` (our errors on a file) stands for upstream's class `wanted`."""
    return any(wanted in classes_of(code) for code in codes)
