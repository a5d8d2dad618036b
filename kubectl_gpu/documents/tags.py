"""Explicit tags on scalars as NVIDIA's Go reader (go.yaml.in/yaml/v2) reads them.

Owns which tags Go checks a scalar against (`!!int x` fails) and which give the text as
written (`!`, `!foo`, `!!set`, a verbatim `!<...>`), the `!!null` and `!!binary` readings, and
the findings about a tagged scalar. Must not walk node trees (`conversion.py`) or parse text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubectl_gpu import findings
from kubectl_gpu.documents.values import shown
from kubectl_gpu.findings import Finding, Path

if TYPE_CHECKING:
    import yaml

# yaml.v2's resolve.go: the tags it checks a scalar against (`!!int x` fails); a scalar with
# any other tag (`!foo`, the non-specific `!`, `!!set`, a verbatim `!<...>`) is the string
# as written. The tags of mappings and sequences are not looked at.
YAML_ORG = "tag:yaml.org,2002:"
_CHECKED_TAGS = frozenset({"str", "bool", "int", "float", "timestamp", "null", "binary"})
_GO_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
TAGGED_STRING = "yaml.tag-makes-string"  # an error where a field wants the value untagged


class Check:
    """Marker: a tag Go checks the scalar against, as PyYAML does: read it as before."""


CHECK = Check()


def explicitly_tagged(node: yaml.Node, written: str, path: Path) -> Any:
    """A scalar with an explicit tag, as Go's yaml.v2 reads it: the value, a finding (Go
    refuses the file), or `CHECK` where PyYAML's reading already agrees.

    A tag Go does not check (`!`, `!foo`, `!!set`, `!<tag:example.com:x>`) gives the string
    as written; `!!null` takes only the null spellings; `!!binary` is decoded (base64, then
    the bytes as UTF-8, each invalid byte read as U+FFFD, as Go's JSON encoding does).
    """
    short = node.tag[len(YAML_ORG) :] if node.tag.startswith(YAML_ORG) else None
    if written == "!" or short not in _CHECKED_TAGS:
        return str(node.value)
    if short == "null" and node.value not in _GO_NULLS:
        return tag_refused(node, path, f"cannot decode !!str `{shown(node.value)}` as a !!null")
    if short == "binary":
        import base64
        import binascii

        try:
            raw = base64.b64decode(node.value.replace("\n", "").replace("\r", ""), validate=True)
        except (binascii.Error, ValueError):
            return tag_refused(node, path, "!!binary value contains invalid base64 data")
        return raw.decode("utf-8", "replace")
    return CHECK


def made_string(written: str, text: str, path: Path) -> Finding:
    """A tag Go does not check turns what reads as a number (or a boolean, or null) into text.
    A warning: `validation` makes it the error where a field then wants the number."""
    value = shown(text)
    return findings.warning(
        path,
        TAGGED_STRING,
        f"the tag '{written}' makes {value} the string '{value}' to NVIDIA's Go YAML reader "
        "(it reads a scalar whose tag it does not check as the text written)",
        f"remove the tag: write {value}",
    )


def tag_refused(node: yaml.Node, path: Path, upstream: str) -> Finding:
    value = shown(node.value)
    tag = node.tag.replace(YAML_ORG, "!!")
    return findings.error(
        path,
        "yaml.bad-scalar",
        f"'{value}' is not a valid {tag} value: NVIDIA's Go YAML reader refuses the file "
        f'("{upstream}")',
        "remove the tag, or write a value of that type",
    )


def bad_scalar(node: yaml.Node, path: Path) -> Finding:
    """A tagged scalar whose text is not of its type (`!!int x`, `!!bool maybe`, `!foo 1`)."""
    value = shown(node.value)
    tag = node.tag.replace(YAML_ORG, "!!")
    return findings.error(
        path,
        "yaml.bad-scalar",
        f"'{value}' is not a valid {tag} value",
        "remove the tag, or write a value of that type (e.g. !!int 4, !!bool true)",
    )
