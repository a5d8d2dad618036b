"""`refused_port()`: a port on 127.0.0.1 where every connection is refused, for the whole test.

Tests of an unreachable server used to bind a probe socket to port 0, close it and dial the
number; under pytest-xdist another worker (or a control plane) may be given that port in
between, and the "unreachable" server answers. A socket bound but not listening holds the
port, and the kernel refuses every connection to it.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator


@contextlib.contextmanager
def refused_port() -> Iterator[int]:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield int(held.getsockname()[1])
