"""pytest fixtures for the real control plane, importable as a plugin.

`control_plane`: one `ControlPlane` per test session, i.e. per pytest-xdist worker under
`make test` (starting one costs seconds; building its binaries the first time costs many
minutes, done once per machine by scripts/gobins.py and cached). Tests share it and keep out
of each other's way with their own namespaces and node names. `KUBECTL_GPU_CONTROL_PLANE=1.34`
runs the same tests against the oldest release `install` accepts. Where Go or the module proxy
is missing the fixture fails with the build step's own explanation (CI must not skip the real
thing silently).
"""

from __future__ import annotations

import pytest

from tests.controlplane.plane import ControlPlane


@pytest.fixture(scope="session")
def control_plane() -> ControlPlane:
    """The session's one plane, shared with the simulated clusters (tests/fakes/cluster/
    sharedplane.py starts it on first use and stops it at exit)."""
    from tests.fakes.cluster import sharedplane

    try:
        return sharedplane.plane()
    except Exception as error:  # the build step's or a component's own words
        pytest.fail(f"the real control plane did not start: {error}", pytrace=False)
