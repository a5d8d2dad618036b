"""The text in a config file's bytes, decoded as NVIDIA's Go YAML reader decodes it.

Owns choosing the encoding: go.yaml.in/yaml/v2 (through sigs.k8s.io/yaml, in the device
plugin and mig-parted) reads UTF-16 when the file starts with a UTF-16 byte-order mark, and
UTF-8 otherwise (a UTF-8 BOM allowed). The BOM is kept as the text's first character
(U+FEFF), as the reader sees it: every YAML parser skips it there, and a second one after it
is a finding of `parsing`'s. Must not parse YAML. Pure: standard library only.
"""

from __future__ import annotations

_BOMS = (
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
    (b"\xef\xbb\xbf", "utf-8"),
)


def decode(raw: bytes) -> str:
    """The text of `raw`; raises UnicodeDecodeError (with the byte's offset in `raw`) where
    it is not text in the encoding its first bytes name. UTF-16 without a BOM is not
    detected, as in Go: its zero bytes are control characters to every YAML reader."""
    for bom, encoding in _BOMS:
        if raw.startswith(bom):
            try:
                return "\ufeff" + raw[len(bom) :].decode(encoding)
            except UnicodeDecodeError as e:
                e.start += len(bom)
                e.end += len(bom)
                raise
    return raw.decode("utf-8")
