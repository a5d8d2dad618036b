"""A simulated cluster's node networks: one network namespace per GPU node, made and removed.

Owns `lay_out` (a namespace per GPU node in a slot of the cluster's own, relaying the API
server, and KWOK's kubelet server where its certificate names the node's address, onto the
node's loopback; the node's own processes then run inside) and `tear_down`. Must not start
processes in them (the runtimes do) or decide which pods get which address (netns.py and the
kubelet stand-in do).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.kit.plane.netns import NodeNetwork, Slot

if TYPE_CHECKING:
    from tests.kit.node.agents import NodeSide
    from tests.kit.node.nodes import SimNode
    from tests.kit.plane import ControlPlane


def lay_out(
    plane: ControlPlane,
    nodes: dict[str, SimNode],
    sides: dict[str, NodeSide],
    networks: dict[str, NodeNetwork],
) -> Slot:
    """A namespace per GPU node, with a relay to the API server on its loopback; each is added
    to `networks` (shared with the runtimes that place pods in them) and to its node's side."""
    slot = Slot.acquire()
    for name, node in nodes.items():
        if not node.gpus:
            continue
        network = NodeNetwork(slot, name, node.index)
        networks[name] = network
        network.create()
        network.relay_loopback(plane.port)
        if network.address in plane.kubelet_addresses:
            network.relay_loopback(plane.kubelet_port, inside=network.address)
        if name in sides:
            sides[name].network = network
    return slot


def tear_down(networks: dict[str, NodeNetwork], slot: Slot | None) -> None:
    """The namespaces, routes and relays, then the slot (the last one takes the guards). Stop
    the processes inside first: they keep their namespaces alive."""
    for network in networks.values():
        network.destroy()
    networks.clear()
    if slot is not None:
        slot.release()
