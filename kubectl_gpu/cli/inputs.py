"""Reading the files users pass with -f: a path or '-' (stdin), size-capped, UTF-8.

Owns the input limits and the wording of unreadable inputs, for every command that
reads a config file. Must not parse or validate (that is `validation.py`).
"""

from __future__ import annotations

import os
import stat
import sys
from typing import Any

import click

from kubectl_gpu import documents
from kubectl_gpu.cli import render
from kubectl_gpu.errors import ConfigError, InputError, printable

MAX_INPUT_BYTES = 4 * 1024 * 1024  # a ConfigMap holds at most 1 MiB; leave room for comments
STDIN = "-"


class UnreadableInput(InputError):
    """An input that cannot be read as text; `problem` is the reason without the name."""

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(
            f"{name}: {problem}", hint="check the path and that the file is UTF-8 YAML or JSON"
        )
        self.name = name
        self.problem = problem


def display_name(filename: str) -> str:
    """How an input is named in messages (control characters escaped)."""
    return "<stdin>" if filename == STDIN else printable(filename) or "''"


def read_text(filename: str) -> tuple[str, str]:
    """Return (display name, text) of a file or stdin, or raise `UnreadableInput`.

    Only regular files are read: a FIFO or device would block or never end, and a
    directory (or '', which names the current one) is not a config.
    """
    name = display_name(filename)
    if not filename:
        raise UnreadableInput(name, "the file name is empty")
    try:
        if filename == STDIN:
            raw = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        else:
            raw = _read_regular(name, filename)
    except FileNotFoundError as e:
        raise UnreadableInput(name, "the file does not exist") from e
    except OSError as e:
        raise UnreadableInput(name, f"cannot read the file: {e.strerror or e}") from e
    if len(raw) > MAX_INPUT_BYTES:
        raise UnreadableInput(name, f"the input is larger than {MAX_INPUT_BYTES // 2**20} MiB")
    try:
        # as NVIDIA's Go reader decodes a config: UTF-8, or UTF-16 where a BOM says so; the
        # BOM stays in the text, where the YAML layer reads it (a second one changes a file)
        return name, documents.decode(raw)
    except UnicodeDecodeError as e:
        raise UnreadableInput(
            name, f"the input is not UTF-8 text, nor UTF-16 with a byte-order mark (byte {e.start})"
        ) from e


def _read_regular(name: str, filename: str) -> bytes:
    # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, for ever
    fd = os.open(filename, os.O_RDONLY | os.O_NONBLOCK)
    kind = stat.S_IFMT(os.fstat(fd).st_mode)
    if kind != stat.S_IFREG:
        os.close(fd)
        raise _not_regular(name, kind)
    with os.fdopen(fd, "rb") as stream:
        return stream.read(MAX_INPUT_BYTES + 1)


def refuse_special(filename: str) -> None:
    """Raise `UnreadableInput` when `filename` exists but is no regular file: reading a FIFO
    or a device would block or never end. A missing file is left to the reader to report."""
    try:
        kind = stat.S_IFMT(os.stat(filename).st_mode)
    except (OSError, ValueError):
        return
    if kind != stat.S_IFREG:
        raise _not_regular(display_name(filename), kind)


def _not_regular(name: str, kind: int) -> UnreadableInput:
    what = _KINDS.get(kind, "not a regular file")
    return UnreadableInput(name, f"{what}, not a file: give a file, or '-' for stdin")


_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def load_mig_config(filename: str) -> tuple[str, dict[str, Any]]:
    """Read a mig-parted config strictly: every error is printed on stderr and the first
    one is in the raised `ConfigError`; returns (display name, parsed document). A ConfigMap
    holding it (the GPU Operator's custom MIG config), alone, beside other objects or in a
    `kubectl get cm -o yaml` List, gives the mig-parted config it holds under `data` or
    `binaryData` (`config.yaml` first, the key the operator's MIG manager reads): the file
    is taken as `kubectl gpu validate -f` takes it."""
    from kubectl_gpu import validation

    name, text = read_text(filename)
    docs, _ = documents.load_documents(text, name)
    held = any(validation.detect(d.data) in (validation.CONFIGMAP, validation.LIST) for d in docs)
    report = validation.validate_text(text, name, validation.AUTO if held else "mig-config")
    errors = [f for f in report.findings if f.severity.value == "error"]
    if errors:
        for finding in errors:
            click.echo(render.format_finding(finding), err=True)
        where = ":".join(str(p) for p in (errors[0].file, errors[0].line) if p)
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ConfigError(
            f"{name} is not a valid mig-parted config: {where}: {errors[0].message}{more}",
            hint=f"kubectl gpu validate -f {name} lists every problem and how to fix it",
            findings=tuple(errors),
        )
    data = _held_mig_config(name, validation.held_files(docs)) if held else docs[0].data
    if not isinstance(data, dict) or "mig-configs" not in data:
        raise ConfigError(f"{name} holds no mig-parted config (version: v1, mig-configs: …)")
    return name, data


def _held_mig_config(name: str, held: list[Any]) -> Any:
    """The one mig-parted config the input's ConfigMaps hold; an error naming the keys
    where that is none, or more than one and none of them `config.yaml`."""
    from kubectl_gpu import keys

    configs = []
    for file in held:
        inner, _ = documents.load_documents(file.text, f"{name}:{file.key}")
        data = inner[0].data if inner else None
        if isinstance(data, dict) and "mig-configs" in data:
            configs.append((file, data))
    chosen = [c for c in configs if c[0].key == keys.MIG_PARTED_CONFIG_KEY] or configs
    if len(chosen) == 1:
        return chosen[0][1]
    maps = {f.configmap for f in held}
    if chosen and chosen[0][0].key == keys.MIG_PARTED_CONFIG_KEY:  # in several ConfigMaps
        raise ConfigError(
            f"{name}: {len(chosen)} ConfigMaps hold {keys.MIG_PARTED_CONFIG_KEY} "
            f"({', '.join(f.configmap or '?' for f, _ in chosen)})",
            hint="give a file holding only the ConfigMap to apply: kubectl get cm NAME -o yaml",
        )
    shown = [f.key if len(maps) == 1 else f"{f.configmap or '?'}/{f.key}" for f in held]
    where = "the ConfigMap has" if len(maps) <= 1 else f"the {len(maps)} ConfigMaps have"
    raise ConfigError(
        f"{name}: {where} no key {keys.MIG_PARTED_CONFIG_KEY} (keys: {', '.join(shown) or 'none'})",
        hint=f"the GPU Operator's MIG manager reads {keys.MIG_PARTED_CONFIG_KEY}: "
        "put the mig-parted config there",
    )
