"""The agent's usage endpoint, in-process: NVML's processes (the stand-in), the host's /proc
cgroup files and kubelet's allocations (the stand-in) become each pod's own figures."""

from __future__ import annotations

import json
import urllib.request

import jsonschema
import pytest

from kubectl_gpu.agent import usageserver
from kubectl_gpu.usage import document, view
from tests.agent.usagenode import MIB, UsageNode, systemd_cgroup, time_sliced
from tests.conftest import ROOT

UID_A = "1d2c3b4a-0000-4000-8000-00000000000a"
UID_B = "1d2c3b4a-0000-4000-8000-00000000000b"
CID_A, CID_B = "a" * 64, "b" * 64


def get(server: usageserver.UsageServer, path: str) -> tuple[int, dict[str, object]]:
    host, port = server.server_address[:2]
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_time_sliced_pods_get_their_own_memory_and_sm_and_no_isolation(
    usage_node: UsageNode, served: usageserver.UsageServer
) -> None:
    gpu = usage_node.lib.gpu(0).uuid
    time_sliced(usage_node.kubelet, gpu, {"train-a": (UID_A, 0), "train-b": (UID_B, 1)})
    usage_node.process(0, 4101, 12 * 1024, systemd_cgroup(UID_A, CID_A), sm=60)
    usage_node.process(0, 4102, 3 * 1024, systemd_cgroup(UID_B, CID_B), sm=5)
    usage_node.process(0, 999, 512, "0::/system.slice/some-daemon.service\n", sm=1)

    status, body = get(served, "/v1/usage")

    assert status == 200
    jsonschema.validate(body, json.loads((ROOT / "schemas" / "gpu-usage.v1.json").read_text()))
    usage = document.from_dict(body)
    rows = view.make(usage, (), "time-slicing")
    pods = {r.pod: r for r in rows if r.kind == view.POD}
    assert pods["train-a"].memory_used == 12 * 1024 * MIB and pods["train-a"].sm_percent == 60
    assert pods["train-b"].memory_used == 3 * 1024 * MIB and pods["train-b"].sm_percent == 5
    assert pods["train-a"].device == "::0" and pods["train-b"].device == "::1"
    assert pods["train-a"].limit is not None and pods["train-a"].limit.form == "none"
    assert "default/train-b" in pods["train-a"].limit.neighbours
    assert "pid 999 (no pod)" in pods["train-a"].limit.neighbours
    [stray] = [r for r in rows if r.kind == view.NO_POD]
    assert stray.pids == (999,) and stray.memory_used == 512 * MIB
    [total] = [r for r in rows if r.kind == view.GPU]
    assert total.memory_used == (12 * 1024 + 3 * 1024 + 512) * MIB


def test_the_answer_carries_no_command_line_or_environment(
    usage_node: UsageNode, served: usageserver.UsageServer
) -> None:
    usage_node.process(0, 4101, 100, systemd_cgroup(UID_A, CID_A))
    (usage_node.proc / "4101" / "cmdline").write_text("python\0train.py\0--token=SECRET")
    (usage_node.proc / "4101" / "environ").write_text("AWS_SECRET_ACCESS_KEY=SECRET")

    status, body = get(served, "/v1/usage")

    assert status == 200 and "SECRET" not in json.dumps(body)
    [process] = body["gpus"][0]["processes"]  # type: ignore[index]
    assert set(process) == {"pid", "usedMemoryBytes", "gpuInstance", "computeInstance",
                            "smPercent", "smUnavailable", "podUID", "containerID"}  # fmt: skip


def test_a_process_whose_cgroup_is_gone_is_in_no_pod(
    usage_node: UsageNode, served: usageserver.UsageServer
) -> None:
    usage_node.lib.add_process(0, 5555, used_mib=64)  # no /proc entry: it ended meanwhile

    status, body = get(served, "/v1/usage")

    assert status == 200
    [process] = body["gpus"][0]["processes"]  # type: ignore[index]
    assert process["podUID"] is None and process["pid"] == 5555


def test_no_sm_samples_is_said_not_shown_as_zero(
    usage_node: UsageNode, served: usageserver.UsageServer
) -> None:
    usage_node.process(0, 4101, 100, systemd_cgroup(UID_A, CID_A), sm=None)

    _, body = get(served, "/v1/usage")

    [process] = body["gpus"][0]["processes"]  # type: ignore[index]
    assert process["smPercent"] is None and process["smUnavailable"] == "no-samples"


def test_the_sampler_fills_the_idle_ring_the_endpoint_serves(usage_node: UsageNode) -> None:
    from kubectl_gpu.agent import usagereading
    from kubectl_gpu.usage import samples

    gpu = usage_node.lib.gpu(0).uuid
    time_sliced(usage_node.kubelet, gpu, {"train-a": (UID_A, 0), "lazy": (UID_B, 1)})
    usage_node.process(0, 4101, 1024, systemd_cgroup(UID_A, CID_A), sm=60)
    clock = iter(range(1_000, 10_000, 60))
    reader = usage_node.reader()
    reader.clock = lambda: float(next(clock))
    sampler = usagereading.Sampler(reader, 60, 10)
    for _ in range(3):
        sampler.sample()
    server = usageserver.UsageServer(("127.0.0.1", 0), reader, sampler)
    server.serve_in_background()
    try:
        status, body = get(server, "/v1/idle")
    finally:
        server.shutdown()
        server.server_close()

    assert status == 200
    devices = {h.pod: s for h, s in samples.from_dict(body)}
    assert set(devices) == {"train-a", "lazy"} and len(devices["lazy"]) == 3
    assert [s.sm_percent for s in devices["train-a"]] == [60, 60, 60]
    assert all(s.memory == 0 for s in devices["lazy"])


def test_usage_port_zero_turns_the_endpoint_off(
    usage_node: UsageNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubectl_gpu import agent
    from kubectl_gpu.agent import passes, reporting

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the endpoint was started")

    def settings(*argv: str) -> passes.Settings:
        return agent.settings_of(agent._parser().parse_args(["--node-name", "n1", *argv]))

    monkeypatch.setattr(usageserver, "UsageServer", refuse)
    sources = reporting.Sources("n1", usage_node.kubelet.root)
    with passes.usage_endpoint(settings("--usage-port", "0"), sources):
        pass
    with passes.usage_endpoint(settings("--once"), sources):
        pass
    defaults = settings()
    assert (defaults.usage_port, str(defaults.proc_root)) == (9402, "/proc")
