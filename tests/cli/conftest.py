"""Fixtures the `map` and `top` command tests share: `real`, a simulated cluster on the real
control plane with no nodes yet and nothing simulated on them (each test adds the nodes and
reports it needs), and `kubeconfig`, its administrator kubeconfig."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit.cluster import SimCluster
from tests.kit.cluster.fixture import MakeSimCluster


@pytest.fixture
def real(sim_cluster: MakeSimCluster) -> SimCluster:
    """A real cluster with no nodes yet and nothing simulated on them."""
    return sim_cluster([])


@pytest.fixture
def kubeconfig(real: SimCluster) -> Path:
    return real.kubeconfig
