"""A loopback relay: each connection accepted on a listening socket (one opened inside a node's
network namespace) forwarded to a target address in the host's namespace, byte for byte in both
directions, until either side closes.

Owns `Relay` (its accept and pump threads, closed by `stop`). netns.py opens the listeners; this
module must not enter a namespace or change any address or route itself.
"""

from __future__ import annotations

import contextlib
import errno
import selectors
import socket
import threading


class Relay:
    """Forwards each connection accepted on `listener` to `target` (sockets made here, in the
    host's namespace), byte for byte in both directions, until either side closes."""

    def __init__(self, listener: socket.socket, target: tuple[str, int], name: str) -> None:
        self.listener = listener
        self.target = target
        self.name = name
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()

    def start(self) -> Relay:
        thread = threading.Thread(target=self._accept, name=f"sim-{self.name}", daemon=True)
        self._threads.append(thread)
        thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        for thread in list(self._threads):
            thread.join(5)

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                inner, _ = self.listener.accept()
            except OSError:
                return
            thread = threading.Thread(
                target=self._pump, args=(inner,), name=f"sim-{self.name}-conn", daemon=True
            )
            with self._lock:
                self._threads = [t for t in self._threads if t.is_alive()]
                self._threads.append(thread)
            thread.start()

    def _pump(self, inner: socket.socket) -> None:
        try:
            outer = socket.create_connection(self.target, timeout=10)
        except OSError:
            inner.close()
            return
        outer.settimeout(None)
        with self._lock:
            self._open.update((inner, outer))
        try:
            _copy_both(inner, outer)
        finally:
            with self._lock:
                self._open.difference_update((inner, outer))
            inner.close()
            outer.close()


def _copy_both(a: socket.socket, b: socket.socket) -> None:
    peers = {a: b, b: a}
    with selectors.DefaultSelector() as selector:
        for sock in peers:
            selector.register(sock, selectors.EVENT_READ)
        while True:
            for key, _ in selector.select():
                source: socket.socket = key.fileobj  # type: ignore[assignment]
                try:
                    data = source.recv(65536)
                except OSError as exc:
                    if exc.errno in (errno.EAGAIN, errno.EINTR):
                        continue
                    return
                if not data:
                    return
                try:
                    peers[source].sendall(data)
                except OSError:
                    return
