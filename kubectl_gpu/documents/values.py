"""What a plain scalar or key means to NVIDIA's Go reader, where other readers differ.

Owns the findings about plain values and keys no schema can see: numbers the parsers read
differently or too long to read (`yaml.sexagesimal-number`, `yaml.number-too-large`, bases other
than 10), values JSON cannot hold, null keys, keys Go names otherwise, duplicate keys and YAML
1.1 booleans. Must not walk node trees (`conversion.py`) or read tags (`tags.py`).
"""

from __future__ import annotations

import dataclasses

from kubectl_gpu import findings
from kubectl_gpu.findings import Finding, Path

# Longer than any number Go's reader spells in full (a 64-bit value in binary is 0b and 64
# digits, with a sign; float64's longest exact decimal forms have about 40 significant
# digits); Python refuses to read ints over 4,300 digits and reading a long one costs time
# quadratic in its length.
MAX_NUMBER_CHARS = 80
YAML11_BOOLEANS = {"yes", "no", "on", "off"}  # y and n: see scalars.py
# Findings about a scalar the loader keeps as text: the schema's "expected an integer, found
# the string …" at the same place says nothing more (validation drops it).
VALUE_CODES = frozenset({"yaml.bad-scalar", "yaml.number-too-large", "yaml.sexagesimal-number"})
NON_DECIMAL = "yaml.non-decimal-number"


def null_key(text: str, path: Path) -> Finding:
    shown = text or "an empty key"
    return findings.error(
        path,
        "yaml.null-key",
        f"'{shown}' is a null key: the device plugin, mig-parted and Kubernetes convert YAML to "
        'JSON and refuse the whole file ("unsupported map key")',
        "quote the key if it is a name",
    )


def key_renamed(text: str, key: str, path: Path) -> Finding:
    problem = findings.warning(
        path,
        "yaml.key-not-string",
        f"the key '{text}' is not a string to YAML 1.1: NVIDIA's tools read it as {key} and "
        f"name it '{key}', so looking it up as '{text}' (nvidia-mig-parted apply -c {text}, a "
        f"nvidia.com/mig.config={text} label) finds nothing",
        f"quote the key: '{text}'",
    )
    return dataclasses.replace(problem, at_key=True)


def not_json(text: str, path: Path) -> Finding:
    return findings.error(
        path,
        "yaml.not-json",
        f"'{text}' is infinity or not-a-number, which JSON cannot hold: the device plugin, "
        "mig-parted and Kubernetes convert YAML to JSON and refuse the whole file "
        '("json: unsupported value")',
        "write a number, or quote the text",
    )


def number_problem(text: str, tag: str, path: Path) -> Finding | None:
    """A number the YAML parsers read differently, or one too long to be any field's value."""
    if tag == "float" and text.lstrip("+-").lower() in (".inf", ".nan"):
        return not_json(text, path)
    if len(text) > MAX_NUMBER_CHARS:
        return findings.error(
            path,
            "yaml.number-too-large",
            f"the number '{shown(text)}' has {len(text)} characters: larger than any field takes "
            "(counts, replicas and indices are at most 19 digits)",
            "write a smaller number",
        )
    if ":" in text:
        return findings.error(
            path,
            "yaml.sexagesimal-number",
            f"'{text}' is a base-60 number to YAML 1.1 parsers in Python, but a string to "
            "the Go parsers NVIDIA's tools use: they disagree on what it means",
            "write the number in decimal, or quote it if it is text",
        )
    digits = text.lstrip("+-").lower()
    base = {"0x": 16, "0o": 8, "0b": 2}.get(digits[:2], 8 if digits[:1] == "0" else 10)
    if tag == "int" and base != 10 and digits != "0":
        value = _int(text)
        return findings.warning(
            path,
            NON_DECIMAL,
            f"'{text}' is read as {value} (base {base}); a reader can easily take it for "
            "something else",
            f"write {value}",
        )
    return None


def _int(text: str) -> int | str:
    import yaml

    try:
        value: int = yaml.constructor.SafeConstructor().construct_yaml_int(
            yaml.ScalarNode("tag:yaml.org,2002:int", text)
        )
    except ValueError:
        return text
    return value


def shown(text: str) -> str:
    from kubectl_gpu.errors import shortened

    return shortened(text, 40)


def duplicate_key(key: str, path: Path, first: int) -> Finding:
    problem = findings.error(
        path,
        "yaml.duplicate-key",
        f"duplicate key '{key}' (first defined on line {first}): the device plugin and "
        "mig-parted use the last one, other YAML tools may not",
        "keep one of them",
    )
    return dataclasses.replace(problem, at_key=True)


def ambiguous_boolean(word: str, path: Path) -> Finding:
    meaning = "true" if word.lower() in ("y", "yes", "on") else "false"
    return findings.warning(
        path,
        "yaml.ambiguous-boolean",
        f"'{word}' is read as {meaning} by YAML 1.1 parsers (the device plugin, mig-parted) "
        "but as a string by YAML 1.2 parsers",
        f"write {meaning}",
    )
