"""The oracles, built once per machine by scripts/gobins.py before the first test that needs one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.differential import oracle
from tests.kit.kube import builds


def _built(name: str) -> Path:
    try:
        return oracle.build(name)
    except builds.NotBuilt as error:
        if os.environ.get("CI"):
            raise  # in CI the oracles must run, not skip
        pytest.skip(str(error))


@pytest.fixture(scope="session")
def device_plugin_oracle() -> Path:
    return _built(oracle.DEVICE_PLUGIN)


@pytest.fixture(scope="session")
def mig_parted_oracle() -> Path:
    return _built(oracle.MIG_PARTED)


@pytest.fixture(scope="session")
def cel_oracle() -> Path:
    return _built(oracle.CEL)


@pytest.fixture(scope="session")
def dra_driver_oracle() -> Path:
    return _built(oracle.DRA_DRIVER)
