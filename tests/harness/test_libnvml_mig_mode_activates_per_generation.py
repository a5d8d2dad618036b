"""MIG mode changes as on real GPUs (docs/upstream-facts.md M2.1): Hopper switches at once; Ampere
stays pending with activation status RESET_REQUIRED until a GPU reset, which a running process
blocks (IN_USE); a GPU without MIG answers NOT_SUPPORTED."""

from __future__ import annotations

import pynvml
import pytest

from tests.kit.node.libnvml import FakeLibNvml
from tests.kit.node.libnvml.fixture import MakeFakeNvml

ENABLE, DISABLE = pynvml.NVML_DEVICE_MIG_ENABLE, pynvml.NVML_DEVICE_MIG_DISABLE


@pytest.fixture
def node(fake_nvml: MakeFakeNvml) -> FakeLibNvml:
    lib = fake_nvml(gpus=["H100-SXM5-80GB", "A100-SXM4-40GB", "L4"])
    pynvml.nvmlInit()
    return lib


def _gpu(index: int) -> object:
    return pynvml.nvmlDeviceGetHandleByIndex(index)


def test_h100_enable_takes_effect_immediately(node: FakeLibNvml) -> None:
    activation = pynvml.nvmlDeviceSetMigMode(_gpu(0), ENABLE)

    assert activation == pynvml.NVML_SUCCESS
    assert pynvml.nvmlDeviceGetMigMode(_gpu(0)) == [ENABLE, ENABLE]
    assert pynvml.nvmlDeviceGetMaxMigDeviceCount(_gpu(0)) == 7


def test_a100_enable_stays_pending_with_reset_required(node: FakeLibNvml) -> None:
    activation = pynvml.nvmlDeviceSetMigMode(_gpu(1), ENABLE)

    assert activation == pynvml.NVML_ERROR_RESET_REQUIRED
    assert pynvml.nvmlDeviceGetMigMode(_gpu(1)) == [DISABLE, ENABLE]
    assert pynvml.nvmlDeviceGetMaxMigDeviceCount(_gpu(1)) == 0


def test_a100_pending_enable_becomes_current_after_reset(node: FakeLibNvml) -> None:
    pynvml.nvmlDeviceSetMigMode(_gpu(1), ENABLE)

    assert node.reset(1) == pynvml.NVML_SUCCESS

    assert pynvml.nvmlDeviceGetMigMode(_gpu(1)) == [ENABLE, ENABLE]


def test_reset_with_a_running_process_is_in_use_and_keeps_the_mode_pending(
    node: FakeLibNvml,
) -> None:
    pynvml.nvmlDeviceSetMigMode(_gpu(1), ENABLE)
    node.add_process(1, pid=7)

    assert node.reset(1) == pynvml.NVML_ERROR_IN_USE

    assert pynvml.nvmlDeviceGetMigMode(_gpu(1)) == [DISABLE, ENABLE]


def test_a_mode_change_on_a_busy_gpu_reports_in_use_as_activation_status(
    node: FakeLibNvml,
) -> None:
    node.add_process(0, pid=8)

    activation = pynvml.nvmlDeviceSetMigMode(_gpu(0), ENABLE)

    assert activation == pynvml.NVML_ERROR_IN_USE
    assert pynvml.nvmlDeviceGetMigMode(_gpu(0)) == [DISABLE, ENABLE]


def test_setting_the_current_mode_again_cancels_a_pending_change(node: FakeLibNvml) -> None:
    pynvml.nvmlDeviceSetMigMode(_gpu(1), ENABLE)

    activation = pynvml.nvmlDeviceSetMigMode(_gpu(1), DISABLE)

    assert activation == pynvml.NVML_SUCCESS
    assert pynvml.nvmlDeviceGetMigMode(_gpu(1)) == [DISABLE, DISABLE]


def test_hopper_loses_mig_mode_on_reset_while_ampere_keeps_it(node: FakeLibNvml) -> None:
    pynvml.nvmlDeviceSetMigMode(_gpu(0), ENABLE)
    pynvml.nvmlDeviceSetMigMode(_gpu(1), ENABLE)
    node.reset(1)

    node.reboot()

    assert pynvml.nvmlDeviceGetMigMode(_gpu(0)) == [DISABLE, DISABLE]
    assert pynvml.nvmlDeviceGetMigMode(_gpu(1)) == [ENABLE, ENABLE]


@pytest.mark.parametrize("call", ["get", "set"])
def test_l4_has_no_mig_mode(node: FakeLibNvml, call: str) -> None:
    with pytest.raises(pynvml.NVMLError_NotSupported):
        if call == "get":
            pynvml.nvmlDeviceGetMigMode(_gpu(2))
        else:
            pynvml.nvmlDeviceSetMigMode(_gpu(2), ENABLE)


def test_l4_reports_no_mig_devices(node: FakeLibNvml) -> None:
    assert pynvml.nvmlDeviceGetMaxMigDeviceCount(_gpu(2)) == 0
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceGetMigDeviceHandleByIndex(_gpu(2), 0)
