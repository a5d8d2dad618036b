"""The ``fake_kubelet`` pytest fixture: a started kubelet stand-in under a short temp root.

Owns: the stand-in's lifetime (start before the test; stop, join its threads and clean up after
it), choosing a root whose socket path fits AF_UNIX's 108-byte limit, and a client helper built
from the generated stubs. Registered for the whole suite by
``pytest_plugins`` in tests/conftest.py; no test imports it. Must not: hold kubelet behaviour
(that is tests/kit/node/kubelet/).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from kubectl_gpu._proto.podresources.v1 import api_pb2_grpc
from tests.kit.node.kubelet import SOCKET_PATH_MAX, FakeKubelet

_SOCKET_SUFFIX = "/kubelet/pod-resources/kubelet.sock"


def _short_root(tmp_path: Path) -> tuple[Path, bool]:
    """``tmp_path/kubelet`` when the socket path fits, else a fresh ``/tmp/kl…`` directory."""
    if len(os.fsencode(str(tmp_path) + _SOCKET_SUFFIX)) <= SOCKET_PATH_MAX:
        return tmp_path / "kubelet", False
    return Path(tempfile.mkdtemp(prefix="kl", dir="/tmp")), True


@pytest.fixture
def fake_kubelet(tmp_path: Path) -> Iterator[FakeKubelet]:
    """A kubelet root with a serving PodResources socket and no checkpoint yet.

    Use ``set_pods``/``set_allocatable`` for what the socket reports and ``write_checkpoint``
    (``"current"`` or ``"pre-1.20"``), ``write_corrupt_checkpoint`` or ``write_checkpoint_file``
    for the checkpoint. The product finds both through ``fake_kubelet.root`` (``--kubelet-root``).
    """
    root, owned = _short_root(tmp_path)
    kubelet = FakeKubelet(root)
    kubelet.start()
    try:
        yield kubelet
    finally:
        kubelet.stop()
        if owned:
            shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def podresources_client(target: str) -> Iterator[api_pb2_grpc.PodResourcesListerStub]:
    """A client built from the generated stubs, as the product builds one; closed on exit."""
    with grpc.insecure_channel(target) as channel:
        yield api_pb2_grpc.PodResourcesListerStub(channel)
