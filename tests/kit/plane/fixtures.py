"""pytest fixtures for the real control plane, importable as a plugin.

`control_plane`: one `ControlPlane` per test session, i.e. per pytest-xdist worker under
`make test` (starting one costs seconds; building its binaries the first time costs many
minutes, done once per machine by scripts/gobins.py and cached). Tests share it and keep out
of each other's way with their own namespaces and node names. `KUBECTL_GPU_CONTROL_PLANE=1.34`
runs the same tests against the oldest release `install` accepts. Where Go or the module proxy
is missing the fixture fails with the build step's own explanation (CI must not skip the real
thing silently). `fault_proxy` (one per module) and `proxied_kubeconfig` put a `FaultProxy`
in front of it, for the faults a real server produces only under stress.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kit.plane.faults import FaultProxy
from tests.kit.plane.plane import ControlPlane


@pytest.fixture(scope="session")
def control_plane() -> ControlPlane:
    """The session's one plane, shared with the simulated clusters (tests/kit/cluster/
    sharedplane.py starts it on first use and stops it at exit)."""
    from tests.kit.plane import sharedplane

    try:
        return sharedplane.plane()
    except Exception as error:  # the build step's or a component's own words
        pytest.fail(f"the real control plane did not start: {error}", pytrace=False)


@pytest.fixture(scope="module")
def module_plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """The session's plane for a module whose tests write to it directly (not through a
    simulated cluster, which cleans up after itself): what they leave is removed when the
    module ends, so they keep out of each other's way with names of their own."""
    from tests.kit.plane import sharedplane

    yield control_plane
    sharedplane.reset()


@pytest.fixture(scope="module")
def fault_proxy(module_plane: ControlPlane) -> Iterator[FaultProxy]:
    """A `FaultProxy` in front of the session's plane, one per test module."""
    proxy = FaultProxy.in_front_of(module_plane).start()
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture
def proxied_kubeconfig(
    control_plane: ControlPlane, fault_proxy: FaultProxy, tmp_path: Path, real_control_plane: None
) -> Path:
    """The administrator's kubeconfig through `fault_proxy`, with no fault or request left
    from an earlier test."""
    assert control_plane.creds is not None
    fault_proxy.clear()
    return fault_proxy.kubeconfig(tmp_path / "proxied-kubeconfig", control_plane.creds.admin_token)
