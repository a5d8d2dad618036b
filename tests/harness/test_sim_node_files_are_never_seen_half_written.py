"""Every start of a node program lays the node out again (its MIG minors, its GPUs' PCI
functions). A Helm rollout restarts GFD beside NVIDIA's device plugin, and the plugin reads each
GPU's `numa_node` as it starts (an empty file makes it exit: "eror parsing value for NUMA
node"), so a program must see each file whole, the old bytes or the new, whatever else is
starting on the node."""

from __future__ import annotations

import threading
from pathlib import Path

from tests.kit.cluster import NodeSpec
from tests.kit.node import sandbox
from tests.kit.node.libnvml.driver import lay_out
from tests.kit.node.nodes import SimNode


def test_a_program_starting_beside_another_reads_whole_files(tmp_path: Path) -> None:
    node = SimNode(NodeSpec("gpu-a", "H100-SXM5-80GB", 8), 0)
    node.share_state(lay_out(tmp_path / "driver").state)
    node_sandbox = sandbox.Sandbox(tmp_path)
    node_sandbox.lay_out()
    watched = [
        *sorted(node_sandbox.pci_devices.glob("*/numa_node")),
        node_sandbox.proc_driver / "nvidia-caps" / "mig-minors",
    ]
    whole = {path: path.read_bytes() for path in watched}
    assert len(watched) == 9 and all(whole.values())
    seen: list[tuple[Path, int]] = []
    starting = threading.Event()

    def start_programs() -> None:
        for _ in range(40):  # GFD's and the plugin's starts, one after another
            node_sandbox.lay_out()
        starting.set()

    starter = threading.Thread(target=start_programs)
    starter.start()
    while not starting.is_set():  # the plugin reading as it starts
        seen += [(p, len(d)) for p in watched if (d := p.read_bytes()) != whole[p]]
    starter.join()
    assert seen == []
