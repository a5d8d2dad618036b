"""Fixtures only the agent's own tests use: `usage_node` (one H100 node's NVML, /proc and
kubelet stand-in, in the test's process) and `served` (the agent's `/v1/usage` server over
it, on loopback). The agent fixtures other folders use are in tests/agent/fixtures.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kubectl_gpu.agent import usageserver
from tests.agent.usagenode import UsageNode
from tests.kit.node import libnvml
from tests.kit.node.kubelet import FakeKubelet


@pytest.fixture
def usage_node(tmp_path: Path, fake_kubelet: FakeKubelet) -> Iterator[UsageNode]:
    lib = libnvml.FakeLibNvml(["H100-SXM5-80GB"])
    with libnvml.installed(lib):
        yield UsageNode(lib, tmp_path / "proc", fake_kubelet)


@pytest.fixture
def served(usage_node: UsageNode) -> Iterator[usageserver.UsageServer]:
    server = usageserver.UsageServer(("127.0.0.1", 0), usage_node.reader())
    server.serve_in_background()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
