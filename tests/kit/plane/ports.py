"""Ports on 127.0.0.1: `free_port()` for a component to bind, `refused_port()` for a test of an
unreachable server.

A free port is picked by binding port 0 and letting it go, so another process may bind it
before the component does: whoever starts a component on it must pick again when it lost that
race (processes.py, `Processes.on_free_ports`). Tests of an unreachable server used to dial
such a port too; under pytest-xdist another worker (or a control plane) may be given it in
between, and the "unreachable" server answers. A socket bound but not listening holds the
port, and the kernel refuses every connection to it. Must not start anything on a port.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def refused_port() -> Iterator[int]:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield int(held.getsockname()[1])
