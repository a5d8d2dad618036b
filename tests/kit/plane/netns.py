"""A Linux network namespace per simulated GPU node, so the real API server can reach its pods.

The real kube-apiserver refuses to proxy to loopback (`pods/NAME:PORT/proxy/…` to a 127.x pod IP
is refused), so a node whose pods serve HTTP (the agent's usage endpoint, dcgm-exporter's
`/metrics`) needs addresses of its own. Each such node gets a namespace (`ip netns add`) joined
to the host by a veth pair; the namespace holds the node's address and the IPs of the pods whose
processes run there, each with a /32 host route through the veth, and a route back to the host's
own source address only. Nothing in a namespace can reach any other address.

Owns `Slot` (a per-cluster number, held by an exclusive `flock` under RUN_DIR for the cluster's
life, so that clusters side by side — pytest-xdist workers — get disjoint names and addresses,
and a later run can tell a crashed run's leftovers by a slot lock nobody holds), the guard routes
(`unreachable` for SIM_NETWORKS in the host namespace while any slot is held: the machine's
default route leaves it, and a simulated address that is in no namespace must fail here rather
than be sent off the machine), `NodeNetwork` (one node's namespace, veth and routes;
`command()` wraps a program so it runs inside; `listen()` opens a listening socket inside) and
its relays (`relay_loopback`, with relay.py's `Relay`: the node's 127.0.0.1:PORT forwarded to
the host's, so a process inside reaches the API server at the kubeconfig's unchanged address
and certificate; and the node's address at KWOK's kubelet port, so `kubectl logs` reaches
KWOK's server through the node's own InternalIP). Needs
root and iproute2; says so when they are missing. Must not route any address outside
SIM_NETWORKS, or make any address local to the host.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import ipaddress
import os
import re
import shutil
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, TypeVar

from tests.kit.plane.relay import Relay

RUN_DIR = Path("/run/kubectl-gpu-sim")
NETNS_DIR = Path("/var/run/netns")
PREFIX = "kgs"  # every namespace and veth this module makes: kgs<slot>n<node>[h|c]
# Simulated addresses: node addresses 10.0.<slot>.<node + 10> (KWOK's own default pod pool,
# 10.0.0.0/24, is in it too), pod IPs of networked nodes 10.<128 + slot>.<node>.<n> (and the
# simulated kubelet's 10.244.<node>.<n> on other nodes).
SIM_NETWORKS = ("10.0.0.0/16", "10.128.0.0/9")
MAX_SLOTS = 127
MAX_NODES = 240
# Node addresses KWOK's kubelet certificate names (`certified_addresses`): a networked node in
# this range is registered with its own InternalIP; past it, with 127.0.0.1 as other nodes are.
CERTIFIED_SLOTS = 16
CERTIFIED_NODES = 16
_NAME = re.compile(rf"^{PREFIX}(\d+)n(\d+)[hc]?$")
_CLONE_NEWNET = 0x40000000
_IP_TIMEOUT = 20.0
T = TypeVar("T")


class NetworkError(RuntimeError):
    """The namespaces cannot be made here: what is missing and how to get it."""


def unavailable() -> str | None:
    """Why node networks cannot be made on this machine, or None."""
    if os.geteuid() != 0:
        return "simulated node networks need root (ip netns add, veth pairs, host routes)"
    for tool in ("ip", "nsenter"):
        if shutil.which(tool) is None:
            return f"simulated node networks need `{tool}` on PATH (iproute2, util-linux)"
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(  # noqa: S603 (fixed argv, no shell)
        ["ip", *args], capture_output=True, text=True, timeout=_IP_TIMEOUT, check=False
    )
    if check and result.returncode != 0:
        raise NetworkError(f"ip {' '.join(args)}: {result.stderr.strip() or result.returncode}")
    return result


@contextlib.contextmanager
def _global_lock() -> Iterator[None]:
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    with open(RUN_DIR / "lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def held(number: int) -> bool:
    """Whether a live process holds slot `number` (call under the global lock)."""
    path = RUN_DIR / f"slot-{number}.lock"
    if not path.exists():
        return False
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def slot_in_use(number: int) -> bool:
    """Whether a live cluster holds slot `number` now (its namespaces are that cluster's)."""
    with _global_lock():
        return held(number)


def node_address(slot: int, node: int) -> str:
    return f"10.0.{slot}.{node + 10}"


def certified_addresses() -> tuple[str, ...]:
    """Node addresses for a control plane's kubelet certificate (ControlPlane's
    `kubelet_addresses`), so the API server can reach KWOK's server at a node's own address."""
    return tuple(
        node_address(slot, node)
        for slot in range(1, CERTIFIED_SLOTS + 1)
        for node in range(CERTIFIED_NODES)
    )


class Slot:
    """This cluster's number among the clusters on this machine, held until `release`."""

    def __init__(self, number: int, handle: IO[str]) -> None:
        self.number = number
        self._handle: IO[str] | None = handle

    @classmethod
    def acquire(cls) -> Slot:
        """The lowest free slot; first removes what crashed runs left and sets the guards."""
        reason = unavailable()
        if reason:
            raise NetworkError(reason)
        with _global_lock():
            _sweep()
            for number in range(1, MAX_SLOTS + 1):
                handle = open(RUN_DIR / f"slot-{number}.lock", "a")  # noqa: SIM115 (held)
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    handle.close()
                    continue
                _guard(add=True)
                return cls(number, handle)
        raise NetworkError(f"all {MAX_SLOTS} simulated-network slots are in use")

    def release(self) -> None:
        """Give the slot back; the last slot on the machine takes the guard routes away."""
        if self._handle is None:
            return
        with _global_lock():
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None
            _sweep()
            if not any(held(n) for n in range(1, MAX_SLOTS + 1)):
                _guard(add=False)

    def node_address(self, node: int) -> str:
        return node_address(self.number, node)

    def pod_network(self, node: int) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(f"10.{128 + self.number}.{node}.0/24")


def _guard(*, add: bool) -> None:
    """`unreachable` routes for the simulated ranges: a /32 route through a veth is more
    specific and wins; any other simulated address fails on this machine."""
    for network in SIM_NETWORKS:
        if add:
            result = _ip("route", "add", "unreachable", network, check=False)
            if result.returncode != 0 and "File exists" not in result.stderr:
                raise NetworkError(f"ip route add unreachable {network}: {result.stderr.strip()}")
        else:
            _ip("route", "del", "unreachable", network, check=False)


def _sweep() -> None:
    """Remove namespaces and veths whose slot no live process holds (a crashed run's)."""
    names = [p.name for p in NETNS_DIR.glob(f"{PREFIX}*")] if NETNS_DIR.exists() else []
    links = _ip("-o", "link", "show", check=False).stdout
    names += [m.group(1) for m in re.finditer(rf"^\d+: ({PREFIX}\d+n\d+h)[@:]", links, re.M)]
    for name in sorted(set(names)):
        found = _NAME.match(name)
        if found is None or held(int(found.group(1))):
            continue
        if name.endswith("h"):
            _ip("link", "del", name, check=False)
        else:
            _ip("netns", "del", name, check=False)


# ---- one node ------------------------------------------------------------------------------


class NodeNetwork:
    """One simulated node's network namespace."""

    def __init__(self, slot: Slot, node: str, index: int) -> None:
        if index >= MAX_NODES:
            raise NetworkError(f"node {node}: at most {MAX_NODES} networked nodes per cluster")
        self.node = node
        self.index = index
        self.name = f"{PREFIX}{slot.number}n{index}"
        self.host_if = f"{self.name}h"
        self.inner_if = f"{self.name}c"
        self.path = NETNS_DIR / self.name
        self.address = slot.node_address(index)
        self.pod_network = slot.pod_network(index)
        self._next_host = 1
        self._addresses: set[str] = set()
        self._relays: list[Relay] = []
        self._lock = threading.Lock()

    def create(self) -> NodeNetwork:
        _ip("netns", "add", self.name)
        try:
            _ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.inner_if,
                "netns", self.name)  # fmt: skip
            _ip("link", "set", self.host_if, "up")
            _ip("-n", self.name, "link", "set", "lo", "up")
            _ip("-n", self.name, "link", "set", self.inner_if, "up")
            self.add_address(self.address)
            # Replies go to the host's own address that the kernel picks as the source of
            # what it sends through the veth: that one address, nothing else.
            source = _source_address(self.address)
            _ip("-n", self.name, "route", "add", f"{source}/32", "dev", self.inner_if)
        except BaseException:
            self.destroy()
            raise
        return self

    def destroy(self) -> None:
        """Stop the relays, delete the veth (its routes go with it) and the namespace."""
        for relay in self._relays:
            relay.stop()
        self._relays.clear()
        _ip("link", "del", self.host_if, check=False)
        _ip("netns", "del", self.name, check=False)

    def next_pod_ip(self) -> str:
        """A pod IP of this node's pod network (for pods whose status the node side writes)."""
        with self._lock:
            self._next_host = self._next_host % 250 + 1
            return str(self.pod_network.network_address + self._next_host)

    def add_address(self, address: str) -> None:
        """`address` lives in the namespace, routed to it from the host."""
        where = ipaddress.IPv4Address(address)
        if not any(where in ipaddress.IPv4Network(n) for n in SIM_NETWORKS):
            raise NetworkError(f"{address} is not a simulated address ({', '.join(SIM_NETWORKS)})")
        with self._lock:
            if address in self._addresses:
                return
            self._addresses.add(address)
        _ip("-n", self.name, "addr", "add", f"{address}/32", "dev", self.inner_if)
        _ip("route", "replace", f"{address}/32", "dev", self.host_if)

    def remove_address(self, address: str) -> None:
        with self._lock:
            if address not in self._addresses or address == self.address:
                return
            self._addresses.discard(address)
        _ip("route", "del", f"{address}/32", "dev", self.host_if, check=False)
        _ip("-n", self.name, "addr", "del", f"{address}/32", "dev", self.inner_if, check=False)

    @property
    def addresses(self) -> set[str]:
        with self._lock:
            return set(self._addresses)

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv` run inside the namespace (its mounts and PIDs stay the host's)."""
        return ["nsenter", f"--net={self.path}", "--", *argv]

    def listen(self, address: str, port: int, backlog: int = 64) -> socket.socket:
        """A TCP socket listening on `address:port` inside the namespace."""
        return in_namespace(self.path, lambda: _listening(address, port, backlog))

    def relay_loopback(self, port: int, inside: str = "127.0.0.1") -> Relay:
        """`inside`:`port` in the namespace forwards to 127.0.0.1:`port` of the host (the API
        server for the node's processes; KWOK's kubelet server at the node's own address)."""
        relay = Relay(self.listen(inside, port), ("127.0.0.1", port), f"relay-{self.name}")
        self._relays.append(relay)
        return relay.start()


def _source_address(destination: str) -> str:
    route = _ip("route", "get", destination).stdout
    found = re.search(r"\bsrc (\S+)", route)
    if found is None or ipaddress.IPv4Address(found.group(1)).is_loopback:
        raise NetworkError(
            f"the host has no address to reach {destination} from (`ip route get`: {route!r})"
        )
    return found.group(1)


def _listening(address: str, port: int, backlog: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock


def in_namespace(path: Path, make: Callable[[], T]) -> T:
    """`make()` run by a thread that has entered the namespace at `path` (setns affects only
    the calling thread; that thread then ends, so no thread of this process is left inside)."""
    result: list[T] = []
    failure: list[BaseException] = []

    def enter_and_make() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                if libc.setns(fd, _CLONE_NEWNET) != 0:
                    code = ctypes.get_errno()
                    raise OSError(code, f"setns {path}: {os.strerror(code)}")
            finally:
                os.close(fd)
            result.append(make())
        except BaseException as exc:  # handed to the caller
            failure.append(exc)

    thread = threading.Thread(target=enter_and_make, name=f"netns-{path.name}", daemon=True)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]
