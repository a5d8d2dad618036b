"""The kubelet stand-in leaves no threads or socket behind, and always fits AF_UNIX's limit."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from kubectl_gpu._proto.podresources.v1 import api_pb2
from tests.kit.node.kubelet import SOCKET_PATH_MAX, FakeKubelet
from tests.kit.node.kubelet.fixture import _short_root, podresources_client


def test_stopping_joins_every_server_thread(tmp_path: Path) -> None:
    before = set(threading.enumerate())
    kubelet = FakeKubelet(tmp_path / "k", workers=3)
    kubelet.start()
    with podresources_client(kubelet.target) as client:
        client.List(api_pb2.ListPodResourcesRequest(), timeout=5)
    assert set(threading.enumerate()) > before

    kubelet.stop()

    assert set(threading.enumerate()) == before
    assert not kubelet.socket_path.exists()


def test_a_socket_path_too_long_for_af_unix_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="socket path longer than 107 bytes"):
        FakeKubelet(tmp_path / ("x" * 120))


def test_a_long_tmp_path_falls_back_to_a_short_root(tmp_path: Path) -> None:
    long_tmp = tmp_path / ("d" * 100)

    root, owned = _short_root(long_tmp)
    try:
        assert owned
        assert root.parent == Path("/tmp") and root.name.startswith("kl")
        assert len(str(FakeKubelet(root).socket_path)) <= SOCKET_PATH_MAX
    finally:
        shutil.rmtree(root)
