"""Reading the files users pass with -f: a path or '-' (stdin), size-capped, UTF-8.

Owns the input limits and the wording of unreadable inputs, for every command that
reads a config file. Must not parse or validate (that is `validation.py`).
"""

from __future__ import annotations

import os
import stat
import sys
from typing import TYPE_CHECKING

import click

from kubectl_gpu import documents
from kubectl_gpu.cli import render
from kubectl_gpu.errors import InputError, printable
from kubectl_gpu.findings import Finding

if TYPE_CHECKING:
    from kubectl_gpu.validation import AcceptedMigConfig

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


def load_mig_config(filename: str) -> tuple[str, AcceptedMigConfig]:
    """Read a mig-parted config strictly, through validation's one gate: every error is
    printed on stderr and the rejection (the first, how many more, the `validate` hint) is
    raised; returns (display name, the accepted config: plain data and typed). A ConfigMap
    holding it (the GPU Operator's custom MIG config), alone, beside other objects or in a
    `kubectl get cm -o yaml` List, gives the config it holds, as `validate -f` takes it."""
    from kubectl_gpu import validation

    name, text = read_text(filename)
    try:
        return name, validation.accept_mig_config(text, name, in_configmap=True)
    except validation.ConfigRejected as e:
        for finding in e.findings:
            if isinstance(finding, Finding):
                click.echo(render.format_finding(finding), err=True)
        raise
