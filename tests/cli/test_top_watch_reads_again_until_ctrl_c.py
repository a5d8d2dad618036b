"""`kubectl gpu top -w` on the real control plane, as a user runs it in a terminal: the table
comes again every `--interval` with the figures of the new read (a pod's memory grows between
two reads), each read under its own header, and Ctrl-C ends it at once with the shell's 130,
no "Aborted!" and no traceback. The agent's answers come through the pod proxy as in
test_top_reads_each_node_through_the_pod_proxy.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli import topcluster as t
from tests.kit.cluster import SimCluster

NODE = "gpu-w"
GPU = "GPU-eeeeeeee-1111-2222-3333-444444444444"


@pytest.fixture
def proxy(real: SimCluster, tmp_path: Path) -> Iterator[tuple[t.PodProxyAnswers, Path]]:
    with t.answering_proxy(real, tmp_path) as answered:
        yield answered


def answer(pod: dict[str, object], used_gib: float) -> t.Answer:
    uid = pod["metadata"]["uid"]  # type: ignore[index]
    return t.Answer(
        body=t.usage_doc(
            NODE,
            [t.h100(GPU, used_gib, 40)],
            [(GPU, t.process(41, used_gib, uid, sm=40))],
            [t.held(f"{GPU}::0", GPU, pod, 0, 2)],
        )
    )


class Lines:
    """A process's output read on a thread, so a test can wait for a line without blocking."""

    def __init__(self, stream: object) -> None:
        self.seen: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.seen.append(line.rstrip("\n"))

    def wait_for(self, words: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(words in line for line in self.seen):
            assert time.monotonic() < deadline, f"never printed {words!r}: {self.seen}"
            time.sleep(0.1)

    def join(self) -> None:
        self._thread.join(timeout=10)


def test_watch_prints_each_new_read_and_ends_on_ctrl_c(
    real: SimCluster, proxy: tuple[t.PodProxyAnswers, Path]
) -> None:
    answers, kubeconfig = proxy
    t.gpu_node(real, NODE, "time-slicing")
    agent = t.agent_pod(real, NODE)
    pod = t.running_pod(real, "infer-0", NODE)
    answers.answers[(agent, "/v1/usage")] = answer(pod, 4)
    command = [sys.executable, "-m", "kubectl_gpu", "--kubeconfig", str(kubeconfig), "top",
               f"node/{NODE}", "-w", "--interval", "1s"]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        out, err = Lines(process.stdout), Lines(process.stderr)
        out.wait_for("4.0Gi")
        answers.answers[(agent, "/v1/usage")] = answer(pod, 9.5)  # the pod takes more memory
        out.wait_for("9.5Gi")
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
    out.join()
    err.join()
    process.stdout.close()  # type: ignore[union-attr]
    process.stderr.close()  # type: ignore[union-attr]

    reads = [line for line in out.seen if "default/infer-0" in line]
    assert len(reads) >= 2, out.seen
    assert "4.0Gi" in reads[0] and "9.5Gi" in reads[-1]
    headers = [line for line in err.seen if line.startswith("GPU use from the kubectl-gpu agent")]
    assert len(headers) >= 2, err.seen  # each read says where its figures come from
    assert code == 130, (code, err.seen)
    assert "Traceback" not in "\n".join(err.seen) and "Aborted!" not in "\n".join(err.seen)
