"""`kubectl gpu top --tree` on the real control plane: one node as a platform team runs it
(a time-sliced H100 with two of its four replicas held and a leaked process, an A100 in MIG
with one of three instances used, a whole H100 held by a DRA claim, an H100 no one holds),
drawn node → GPU → MIG device (in placement order) / replica / DRA device → pod with use and
free capacity, in plain characters. The agent's answer comes through the pod proxy as in
test_top_reads_each_node_through_the_pod_proxy.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kubectl_gpu.usage.readings import GpuReading, MigReading
from tests.cli import topcluster as t
from tests.conftest import CliResult
from tests.kit.cluster import SimCluster

Run = Callable[..., CliResult]
GIB = t.GIB
NODE = "ip-10-0-12-34.ec2.internal"
SLICED = "GPU-aaaaaaaa-1111-2222-3333-444444444444"
MIG_GPU = "GPU-bbbbbbbb-1111-2222-3333-444444444444"
CLAIMED = "GPU-cccccccc-1111-2222-3333-444444444444"
IDLE = "GPU-dddddddd-1111-2222-3333-444444444444"


def mig_uuid(n: int) -> str:
    return f"MIG-{n:08x}-2222-3333-4444-555555555555"


@pytest.fixture
def proxy(real: SimCluster, tmp_path: Path) -> Iterator[tuple[t.PodProxyAnswers, Path]]:
    with t.answering_proxy(real, tmp_path) as answered:
        yield answered


def gpu(
    index: int, uuid: str, model: str, used: float, sm: int | None,
    migs: tuple[MigReading, ...] = (),
) -> GpuReading:  # fmt: skip
    total = 80 * GIB
    return GpuReading(index, uuid, model, total, int(used * GIB), sm, "mig" if migs else None,
                      bool(migs), migs)  # fmt: skip


def test_the_tree_shows_each_gpu_its_parts_their_pods_and_what_is_free(
    run_cli: Run, real: SimCluster, proxy: tuple[t.PodProxyAnswers, Path]
) -> None:
    answers, kubeconfig = proxy
    t.gpu_node(real, NODE, "time-slicing")
    agent = t.agent_pod(real, NODE)
    t.ensure_namespace(real, "serving")
    t.ensure_namespace(real, "notebooks")
    a = t.running_pod(real, "infer-6d8f7-x0kq", NODE, "serving")
    b = t.running_pod(real, "infer-6d8f7-x1kq", NODE, "serving")
    nb = t.running_pod(real, "jupyter-0", NODE, "notebooks")
    train = t.running_pod(real, "llama-7b-0", NODE)
    migs = (  # GPU instance IDs in another order than their places on the GPU
        MigReading(mig_uuid(1), "3g.40gb", 1, 0, 40 * GIB, 0, 4, 4),
        MigReading(mig_uuid(2), "2g.20gb", 2, 0, 20 * GIB, 0, 0, 2),
        MigReading(mig_uuid(5), "1g.10gb", 5, 0, 10 * GIB, 6 * GIB, 2, 1),
    )
    dra = t.held("gpu.nvidia.com/pool/gpu-2", None, train, source="dra", resource="claim:gpu")
    answers.answers[(agent, "/v1/usage")] = t.Answer(
        body=t.usage_doc(
            NODE,
            [
                gpu(0, SLICED, "NVIDIA H100 80GB HBM3", 16.5, 70),
                gpu(1, MIG_GPU, "NVIDIA A100-SXM4-80GB", 6, None, migs),
                gpu(2, CLAIMED, "NVIDIA H100 80GB HBM3", 60, 95),
                gpu(3, IDLE, "NVIDIA H100 80GB HBM3", 0.5, 0),
            ],
            [
                (SLICED, t.process(11, 12, a["metadata"]["uid"], sm=60)),
                (SLICED, t.process(12, 4, b["metadata"]["uid"], sm=10)),
                (SLICED, t.process(13, 0.5, None, sm=0)),
                (MIG_GPU, t.process(21, 6, nb["metadata"]["uid"], gi=5, ci=0)),
                (CLAIMED, t.process(31, 60, train["metadata"]["uid"], sm=95)),
            ],
            [
                t.held(f"{SLICED}::0", SLICED, a, 0, 4),
                t.held(f"{SLICED}::1", SLICED, b, 1, 4),
                t.held(
                    mig_uuid(5), MIG_GPU, nb, mig=mig_uuid(5), resource="nvidia.com/mig-1g.10gb"
                ),  # fmt: skip
                dra,
            ],
        )
    )

    result = run_cli("--kubeconfig", str(kubeconfig), "top", f"node/{NODE}", "--tree")

    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        NODE,
        "+-- GPU 0 NVIDIA H100 80GB HBM3 GPU-aaaaaaaa: 16.5Gi of 80.0Gi [###.......] "
        "63.5Gi free, SM 70%",
        "|   +-- ::0",
        "|   |   `-- serving/infer-6d8f7-x0kq  12.0Gi  SM 60%  no isolation (2 neighbours)",
        "|   +-- ::1",
        "|   |   `-- serving/infer-6d8f7-x1kq  4.0Gi  SM 10%  no isolation (2 neighbours)",
        "|   +-- ::2 free",
        "|   +-- ::3 free",
        "|   `-- <no pod> pid 13  512Mi  (in no pod)",
        "+-- GPU 1 NVIDIA A100-SXM4-80GB GPU-bbbbbbbb: 6.0Gi of 80.0Gi [#.........] "
        "74.0Gi free, SM n/a MIG",
        "|   +-- mig 2g.20gb GI 2 @0:2: free, 20.0Gi",
        "|   +-- mig 1g.10gb GI 5 @2:1: 6.0Gi of 10.0Gi [######....] 4.0Gi free",
        "|   |   `-- notebooks/jupyter-0  6.0Gi  SM n/a MIG  limit: MIG 10.0Gi",
        "|   `-- mig 3g.40gb GI 1 @4:4: free, 40.0Gi",
        "+-- GPU 2 NVIDIA H100 80GB HBM3 GPU-cccccccc: 60.0Gi of 80.0Gi [########..] "
        "20.0Gi free, SM 95%",
        "|   `-- gpu-2",
        "|       `-- default/llama-7b-0  60.0Gi  SM 95%  limit: whole GPU 80.0Gi",
        "`-- GPU 3 NVIDIA H100 80GB HBM3 GPU-dddddddd: 512Mi of 80.0Gi [#.........] "
        "79.5Gi free, SM 0%",
        "    `-- free: no pod holds it",
    ]  # fmt: skip
    assert result.stdout.isascii()
    table = run_cli("--kubeconfig", str(kubeconfig), "top", f"node/{NODE}")
    assert table.exit_code == 0, table.stderr
    assert max(len(line) for line in table.stdout.splitlines()) <= 120, table.stdout


def test_tree_refuses_formats_it_cannot_draw(run_cli: Run) -> None:
    result = run_cli("top", "-A", "--tree", "-o", "json")

    assert result.exit_code == 2
    assert "--tree draws the rows as a picture: it cannot be combined with --idle or -o json" in (
        result.stderr
    )
