"""A GPU node served by a DRA driver carries `nvidia.com/gpu.deploy.device-plugin=false` (the GPU
Operator's switch, which NVIDIA's DRA driver asks for): no device plugin runs there, so it
advertises no `nvidia.com/gpu`, and doctor does not call that a fault. A GPU node without the
label that advertises nothing still is one (the whole-cluster run on NVIDIA's DRA plugin:
tests/cli/test_map_shows_an_mps_claim_nvidias_plugin_prepared.py)."""

from __future__ import annotations

from kubectl_gpu import keys
from kubectl_gpu.doctor import health
from tests.doctor.builders import node

NOTHING = "advertises no GPUs"


def test_a_node_with_its_device_plugin_off_is_not_said_to_advertise_nothing() -> None:
    dra = node("dra-1", capacity={}, labels={keys.DEPLOY_DEVICE_PLUGIN_LABEL: "false"})

    found = health.check([dra], [], None)

    assert not [d for d in found if NOTHING in d.message], found
    assert dra.device_plugin_off


def test_a_gpu_node_that_should_advertise_but_does_not_is_still_an_error() -> None:
    for labels in ({}, {keys.DEPLOY_DEVICE_PLUGIN_LABEL: keys.PAUSED_FOR_MIG_CHANGE}):
        silent = node("gpu-1", capacity={}, labels=labels)

        [found] = [d for d in health.check([silent], [], None) if NOTHING in d.message]

        assert found.severity == "error" and found.object == "node/gpu-1"
        assert not silent.device_plugin_off
