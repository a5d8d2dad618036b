"""`map --checkpoint` (and the agent, which reads the same file) on hostile and large
checkpoints: deep nesting and 5,000-digit replica suffixes are reported, not raised; 20,000
entries end well inside the per-test timeout (they took minutes when each allocation scanned
every registered device); one warning kind is shown 20 times, then counted."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from kubectl_gpu import kubelet
from tests.conftest import CliResult

Run = Callable[..., CliResult]
GPU = "GPU-4f2c7e1a-9b3d-4c8e-a1f0-6d5b2e8c9a17"


def _entry(pod: str, device_id: str) -> dict[str, object]:
    return {
        "PodUID": pod,
        "ContainerName": "main",
        "ResourceName": "nvidia.com/gpu",
        "DeviceIDs": {"0": [device_id]},
    }


def _write(tmp_path: Path, entries: list[object], registered: list[str]) -> str:
    data = {"PodDeviceEntries": entries, "RegisteredDevices": {"nvidia.com/gpu": registered}}
    path = tmp_path / "checkpoint.json"
    path.write_text(json.dumps({"Data": data, "Checksum": 1}))
    return str(path)


def test_deep_nesting_is_an_unreadable_checkpoint_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)

    contents = kubelet.read_checkpoint(path)

    assert not contents.readable
    assert "nests too deeply" in contents.warnings[0] and str(path) in contents.warnings[0]


def test_deep_nesting_through_the_cli_exits_1_with_the_reason(run_cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"Data": ' + "[" * 100_000 + "]" * 100_000 + "}")

    result = run_cli("map", "--checkpoint", str(path))

    assert result.exit_code == 1 and result.exception is None
    assert "nests too deeply" in result.stderr


def test_a_5000_digit_replica_suffix_is_an_unknown_id(run_cli: Run, tmp_path: Path) -> None:
    huge = f"{GPU}::{'9' * 5000}"
    path = _write(tmp_path, [_entry("p1", huge), _entry("p2", f"{GPU}::1")], [huge, f"{GPU}::1"])

    result = run_cli("map", "--checkpoint", path, "-o", "json")

    assert result.exit_code == 0 and result.exception is None
    rows = {r["pod_uid"]: r for r in json.loads(result.stdout)["items"]}
    assert rows["p1"]["gpu_uuid"] is None and rows["p1"]["replica"] is None
    assert rows["p2"]["gpu_uuid"] == GPU and rows["p2"]["replica"] == 1
    assert "is not a device ID form kubectl-gpu knows" in result.stderr


def test_20k_entries_map_with_every_row(run_cli: Run, tmp_path: Path) -> None:
    ids = [f"{GPU}::{i}" for i in range(20_000)]
    path = _write(tmp_path, [_entry(f"p{i}", d) for i, d in enumerate(ids)], ids)

    result = run_cli("map", "--checkpoint", path, "-o", "json")

    assert result.exit_code == 0
    assert len(json.loads(result.stdout)["items"]) == 20_000


def test_many_warnings_of_one_kind_are_counted_after_20(run_cli: Run, tmp_path: Path) -> None:
    ids = [f"{GPU}::{i}" for i in range(100)]
    path = _write(tmp_path, [_entry(f"p{i}", d) for i, d in enumerate(ids)], ids[:10])

    result = run_cli("map", "--checkpoint", path)

    assert result.stderr.count("[map.device-unhealthy]") == 21
    assert "warning: 70 more like the above [map.device-unhealthy]" in result.stderr


@pytest.mark.parametrize("flag", ["--checkpoint", "--pods"])
def test_a_fifo_or_device_is_refused_like_validate_does(
    run_cli: Callable[..., CliResult], tmp_path: Path, flag: str
) -> None:
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    checkpoint = tmp_path / "checkpoint.json"
    checkpoint.write_text(
        '{"Data": {"PodDeviceEntries": [], "RegisteredDevices": {}}, "Checksum": 0}'
    )
    given = {"--checkpoint": str(checkpoint), "--pods": None, flag: str(fifo)}
    args = [part for name, value in given.items() if value for part in (name, value)]

    result = run_cli("map", *args)  # no writer ever opens the FIFO: this must not wait

    assert result.exit_code == 1, result.stderr
    assert f"{fifo}: a FIFO (named pipe), not a file" in result.stderr
    device = run_cli("map", *[a if a != str(fifo) else "/dev/zero" for a in args])
    assert device.exit_code == 1 and "a character device, not a file" in device.stderr
