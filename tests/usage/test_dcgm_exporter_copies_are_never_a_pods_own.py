"""dcgm-exporter's metrics (tests/data/dcgm-exporter, both forms): which form a pod serves is
read from its spec; copied device figures stay on the GPU row; per-process values are the
pods' own; the Prometheus text is read within bounds."""

from __future__ import annotations

from typing import Any

import pytest

from kubectl_gpu.usage import dcgm, prometheus, view
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "dcgm-exporter"
MIB = 2**20


def rows(name: str, own: bool) -> list[view.TopRow]:
    parsed = prometheus.parse((DATA / name).read_text())
    assert parsed.skipped == 0 and not parsed.truncated
    return dcgm.rows("gpu-1", parsed.samples, own)


def test_copied_figures_are_shown_on_the_gpu_only() -> None:
    found = rows("time-sliced-copied.prom", own=False)
    pods = {r.pod: r for r in found if r.kind == view.POD}
    assert pods["train-a"].memory_used is None and pods["train-a"].sm_percent is None
    assert pods["train-a"].copied and pods["train-a"].sm_unavailable == dcgm.DEVICE_COPY
    assert pods["train-a"].limit is not None and pods["train-a"].limit.neighbours == (
        "default/train-b",
    )
    [h100] = [r for r in found if r.kind == view.GPU and r.gpu_index == 0]
    assert (h100.memory_used, h100.sm_percent) == (16384 * MIB, 70)
    assert h100.memory_total == (16384 + 64870) * MIB


def test_per_process_values_are_the_pods_own() -> None:
    found = rows("time-sliced-per-process.prom", own=True)
    pods = {r.pod: r for r in found if r.kind == view.POD}
    assert (pods["train-a"].memory_used, pods["train-a"].sm_percent) == (12288 * MIB, 60)
    assert (pods["train-b"].memory_used, pods["train-b"].sm_percent) == (4096 * MIB, 10)
    assert not pods["train-a"].copied and pods["train-a"].device == "::0"
    assert pods["small"].device == "mig 1g.10gb" and pods["small"].sm_unavailable == "mig"
    [h100] = [r for r in found if r.kind == view.GPU and r.gpu_index == 0]
    # the device's own series, kept beside the pods', is the GPU row's; never a pod's sum
    assert (h100.memory_used, h100.sm_percent) == (16898 * MIB, 70)
    assert h100.memory_total == (16898 + 64661) * MIB
    [mig] = [r for r in found if r.kind == view.GPU and r.gpu_index == 1]
    assert (mig.memory_used, mig.memory_total) == (2560 * MIB, (2560 + 7168) * MIB)
    assert pods["small"].memory_used == 2048 * MIB
    assert sorted(r.pod for r in found if r.kind == view.POD) == ["small", "train-a", "train-b"]


def exporter(
    image: str, host_pid: bool = True, env: str | None = "true", args: list[str] | None = None
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "exporter", "image": image, "args": args or []}
    if env is not None:
        container["env"] = [{"name": "KUBERNETES_VIRTUAL_GPUS", "value": env}]
    return {"spec": {"hostPID": host_pid, "containers": [container]}}


@pytest.mark.parametrize(
    ("pod", "own"),
    [
        (exporter("nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-ubuntu22.04"), True),
        (
            exporter(
                "nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.9.0-ubuntu22.04",
                env=None,
                args=["--kubernetes-virtual-gpus"],
            ),
            True,
        ),
        (exporter("nvcr.io/nvidia/k8s/dcgm-exporter:4.5.2-4.8.1-ubuntu22.04"), False),
        (
            exporter("nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-ubuntu22.04", host_pid=False),
            False,
        ),
        (exporter("nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-ubuntu22.04", env="false"), False),
        (exporter("nvcr.io/nvidia/k8s/dcgm-exporter:latest"), False),
    ],
)
def test_the_per_process_form_is_told_from_the_pod_spec(pod: dict[str, Any], own: bool) -> None:
    assert dcgm.per_process(pod) is own


def test_the_text_format_reads_escapes_timestamps_and_skips_garbage() -> None:
    text = (
        '# HELP x y\nm{a="q\\"uote",b="back\\\\slash",c="new\\nline"} 1.5 1700000000000\n'
        "garbage line here\nm2 NaN\nm3{} 7\n"
    )
    parsed = prometheus.parse(text)
    [first, third] = parsed.samples
    assert dict(first.labels) == {"a": 'q"uote', "b": "back\\slash", "c": "new\nline"}
    assert first.value == 1.5 and third.name == "m3" and third.value == 7
    assert parsed.skipped == 2


def test_the_text_is_bounded() -> None:
    huge = "m 1\n" * (prometheus.MAX_SAMPLES + 10)
    parsed = prometheus.parse(huge)
    assert len(parsed.samples) == prometheus.MAX_SAMPLES and parsed.truncated
    many_labels = "m{" + ",".join(f'l{i}="v"' for i in range(100)) + "} 1\n"
    assert prometheus.parse(many_labels).samples == ()
