"""pytest fixtures for the API server stand-in, importable as a plugin from any conftest.

Owns `fake_apiserver` (a started `FakeApiServer`, stopped afterwards, failing the test if a
store subscriber raised), `kubeconfig` (a file for it; nothing global such as KUBECONFIG is
set), `raw` (a byte-level HTTP client), `api_client` (a real `kubernetes` ApiClient built
from that kubeconfig without touching the library's global default configuration) and
`kubectl` (the real binary against the stand-in, isolated from ~/.kube; skips when no
kubectl is on PATH). Use: `pytest_plugins = ["tests.fakes.apiserver.fixtures"]` in the
root conftest, or import the fixtures into a folder's conftest. Must not start anything
at import time.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import config
from kubernetes.client import ApiClient

from tests.fakes.apiserver.kubectl_cli import KubectlRunner
from tests.fakes.apiserver.rawclient import RawClient
from tests.fakes.apiserver.server import FakeApiServer


@pytest.fixture
def fake_apiserver() -> Iterator[FakeApiServer]:
    server = FakeApiServer().start()
    try:
        yield server
    finally:
        server.stop()
    assert not server.store.subscriber_errors, "a store subscriber raised"


@pytest.fixture
def kubeconfig(fake_apiserver: FakeApiServer, tmp_path: Path) -> Path:
    return fake_apiserver.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def raw(fake_apiserver: FakeApiServer) -> RawClient:
    return RawClient(fake_apiserver.url)


@pytest.fixture
def api_client(kubeconfig: Path) -> Iterator[ApiClient]:
    client = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def kubectl(kubeconfig: Path, tmp_path: Path) -> KubectlRunner:
    """The real kubectl against the stand-in; skips when none is on PATH."""
    binary = shutil.which("kubectl")
    if binary is None and os.environ.get("KUBECTL_GPU_REQUIRE_KUBECTL"):
        pytest.fail("kubectl is required here (KUBECTL_GPU_REQUIRE_KUBECTL) but not on PATH")
    if binary is None:
        pytest.skip("no kubectl on PATH; the stand-in is checked against the real binary")
    return KubectlRunner(binary, kubeconfig, tmp_path / "kubectl")
