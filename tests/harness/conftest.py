"""Fixtures for the harness tests: the API server stand-in's, from its fixtures module.

Owns nothing but the import: `fake_apiserver`, `kubeconfig`, `raw`, `api_client` and
`kubectl` are defined in `tests/fakes/apiserver/fixtures.py` so that other test folders
(or the root conftest, as a plugin) can reuse them. Must not set KUBECONFIG or any other
process-wide state.
"""

from __future__ import annotations

from tests.fakes.apiserver.fixtures import (
    api_client,
    fake_apiserver,
    kubeconfig,
    kubectl,
    raw,
)

__all__ = ["api_client", "fake_apiserver", "kubeconfig", "kubectl", "raw"]
