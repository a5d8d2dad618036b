"""A port picked free can be bound by another process before etcd or kube-apiserver binds it
(several planes start side by side under pytest-xdist): the plane picks again instead of
failing the test that started it."""

from __future__ import annotations

import inspect
import socket
from collections.abc import Iterator

import pytest

from tests.kit.plane import plane as planes
from tests.kit.plane.plane import ControlPlane

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def taken() -> Iterator[socket.socket]:
    """A port another process holds (listening, as a racing server would)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held


def test_a_port_taken_before_etcd_and_the_api_server_bind_it_is_picked_again(
    taken: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = int(taken.getsockname()[1])
    lost: list[str] = []
    free = planes.free_port

    def racing() -> int:  # each component's first pick loses the race
        picker = inspect.stack()[1].function
        if picker in ("_start_etcd", "_start_apiserver") and picker not in lost:
            lost.append(picker)
            return port
        return free()

    monkeypatch.setattr(planes, "free_port", racing)
    plane = ControlPlane(kwok=False, controllers=False, scheduler=False, audit=False)
    try:
        plane.start()
        assert plane.server_version().startswith("v")
        assert plane.port != port and str(port) not in plane.etcd_url
    finally:
        plane.stop()
    assert lost == ["_start_etcd", "_start_apiserver"]
