"""`map --checkpoint` prints, byte for byte, what it printed before its rows, findings and
cells were rebuilt for speed (issue 23: 100,000 entries in 3 s).

The checkpoint mixes every form an advertised ID takes (whole GPUs, `::N` replicas, MIG UUIDs,
legacy `MIG-GPU-…/gi/ci`, GKE's `nvidia<N>/gi<K>/vgpu<M>`, tegra, unknown IDs), MIG resources
of the mixed strategy (plain and `.shared`), AllocResp that agrees and that disagrees,
devices held twice, devices not registered (unhealthy), and a pod list that names most pods
and lacks some (stale entries). Each output (table, wide, json, --free; stdout and stderr) is
compared with the sha256 the code before the change printed. A deliberate change of the
output updates the digests: `python -m tests.cli.test_map_checkpoint_output_is_unchanged`
prints them.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tests.kit.node import kubelet as fake

Run = Callable[..., CliResult]
ENTRIES = 3_000

# sha256 of stdout and of stderr, from the code before issue 23's rebuild of rows and cells;
# table, wide and free since the tables got a DEVICE column and the default lost the columns
# that did not fit 120 (json unchanged)
EXPECTED = {
    "free": (
        "fe079ad5db48a87fb0dcc98c1850b7da2ea146e1030d956577eb04266a917e4e",
        "0daaf6ef840e515fb0d944a914c44bedcdadcdd7a8cb986532d591ed2323b07e",
    ),
    "json": (
        "aa5eaaa553ae4be3bc20dc43d76772c3c34abb02590565417c5ae6d77256847a",
        "0daaf6ef840e515fb0d944a914c44bedcdadcdd7a8cb986532d591ed2323b07e",
    ),
    "table": (
        "d6bcb0aa517bb1bc6ede5ed48bd1545fe1ac9e57e65ab26288b5a79b92a228d4",
        "0daaf6ef840e515fb0d944a914c44bedcdadcdd7a8cb986532d591ed2323b07e",
    ),
    "wide": (
        "d8d0bf709f0bac479938c18afb86cb61f2924eef25154230b41e31785646ec7f",
        "0daaf6ef840e515fb0d944a914c44bedcdadcdd7a8cb986532d591ed2323b07e",
    ),
}
ARGS = {
    "table": (),
    "wide": ("-o", "wide"),
    "json": ("-o", "json"),
    "free": ("--free", "-o", "wide"),
}


def _uuid(prefix: str, n: int) -> str:
    return f"{prefix}-{n:08x}-1111-4222-8333-{n:012x}"


def _device(i: int) -> tuple[str, str]:
    """The resource and device ID of entry `i`: every form in turn."""
    gpu = _uuid("GPU", i % 16)
    form = i % 11
    if form in (0, 1, 2):
        return "nvidia.com/gpu", f"{gpu}::{i // 11}"
    if form == 3:
        return "nvidia.com/gpu", gpu
    if form == 4:
        return "nvidia.com/mig-1g.10gb", _uuid("MIG", i)
    if form == 5:
        return "nvidia.com/mig-2g.20gb.shared", f"{_uuid('MIG', i)}::{i % 4}"
    if form == 6:
        return "nvidia.com/mig-3g.40gb", f"MIG-{gpu}/{i % 7}/{i % 3}"
    if form == 7:
        return "nvidia.com/gpu", f"nvidia{i % 8}/gi{i % 3}/vgpu{i % 5}"
    if form == 8:
        return "nvidia.com/gpu", "tegra" if i % 2 else f"nvidia{i % 8}"
    if form == 9:
        return "example.com/fpga", f"fpga-{i}"
    return "nvidia.com/gpu", f"{gpu}::{i // 11}::x"  # no known form


def _checkpoint(tmp_path: Path) -> tuple[str, str]:
    entries, registered, pods = [], {}, []
    for i in range(ENTRIES):
        resource, device = _device(i)
        held = [device] if i % 13 else [device, _device(i + 11)[1]]  # some hold two
        if i % 17 == 0 and i:  # held twice: the device of the entry before
            held = [_device(i - 11)[1]]
        visible = held if i % 19 else [_uuid("GPU", 99)]  # AllocResp that disagrees
        response = fake.nvidia_envvar_response(visible)
        uid = f"uid-{i // 3}"  # three containers a pod
        entries.append(
            fake.CheckpointEntry(
                uid, f"c{i % 3}", resource, {i % 2: tuple(held)}, fake.encode_alloc_resp(response)
            )
        )
        if i % 7:  # a seventh not registered: held but unhealthy
            registered.setdefault(resource, []).extend(held)
        if (i // 3) % 23 and i % 3 == 0:  # one pod of 23 the pod list lacks: stale entries
            name, namespace = f"pod-{i // 3}", f"ns{i % 5}"
            pods.append({"metadata": {"name": name, "namespace": namespace, "uid": uid}})
    for n in range(40):  # registered, held by nobody: --free lists them
        registered.setdefault("nvidia.com/gpu", []).append(f"{_uuid('GPU', 200 + n)}::{n}")
    text = fake.checkpoint_text(fake.checkpoint_document(entries, registered))
    pod_list = tmp_path / "pods.json"
    pod_list.write_text(json.dumps({"kind": "List", "items": pods}))
    return text, str(pod_list)


def _digests(run: Run, tmp_path: Path, output: str) -> tuple[str, str]:
    text, pods = _checkpoint(tmp_path)
    args = ("map", "--checkpoint", "-", "--node-name", "gpu-node-7", "--pods", pods, "-A")
    result = run(*args, *ARGS[output], input=text)
    assert result.exception is None and result.exit_code == 0
    stdout, stderr = (
        hashlib.sha256(s.encode()).hexdigest() for s in (result.stdout, result.stderr)
    )
    return stdout, stderr


@pytest.mark.parametrize("output", sorted(EXPECTED))
def test_a_large_mixed_checkpoint_prints_what_it_printed_before(
    run_cli: Run, tmp_path: Path, output: str
) -> None:
    assert _digests(run_cli, tmp_path, output) == EXPECTED[output]


if __name__ == "__main__":  # print the digests of the code as it is now
    import tempfile

    from tests.conftest import cli_runner

    runner = cli_runner()
    with tempfile.TemporaryDirectory() as directory:
        for name in sorted(EXPECTED):
            print(f'    "{name}": {_digests(runner, Path(directory), name)!r},', file=sys.stdout)
