"""`check()`: every rule about one device-plugin config that its schema cannot express.

Owns the entry point and the order of the findings: the sharing blocks, then flags.plugin,
flags.gfd, imex and the top-level resources block (docs/upstream-facts.md P1, P8).
`check()` runs even on documents the schema rejected, so each rule skips every value whose
type is wrong (the schema pass reports those) and it never raises. Must not hold a rule
itself (each section's module does), repeat a schema finding, or parse text (schema.py turns
text into the plain dict checked here). Pure: standard library and kubectl_gpu.findings only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubectl_gpu.findings import Finding
from kubectl_gpu.sharing import document, flags, imex, names, strategies


def check(doc: Mapping[str, Any] | None) -> list[Finding]:
    """Every rule about one device-plugin config that its schema cannot express.

    `doc` is the plain dict of one config (None for an empty document). Never raises.
    """
    if not isinstance(doc, Mapping):
        return []  # an empty document is the default config; anything else is a schema error
    found: list[Finding] = []
    found.extend(strategies.check(doc))
    found.extend(flags.check_plugin(document.flags(doc, "plugin")))
    found.extend(flags.check_sleep_interval(document.flags(doc, "gfd").get("sleepInterval")))
    found.extend(imex.check(document.mapping(doc.get("imex")) or {}))
    found.extend(names.check_custom_resources(document.mapping(doc.get("resources")) or {}))
    return found
