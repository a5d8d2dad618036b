"""`top`'s rows from one node's reading: each pod's own figures, the limit of its sharing form
(whole GPU, MIG, MPS, none), processes in no pod, pods running nothing, and processes on a
GPU their pod was not given."""

from __future__ import annotations

from kubectl_gpu.usage import isolation, view
from kubectl_gpu.usage.document import Attributed, Held, NodeUsage
from kubectl_gpu.usage.readings import GpuReading, ProcessReading
from kubectl_gpu.usage.view import PodInfo

GIB = 2**30
G0, G1 = "GPU-00000000-0000-0000-0000-000000000000", "GPU-11111111-0000-0000-0000-000000000000"


def gpu(uuid: str, index: int = 0) -> GpuReading:
    return GpuReading(index, uuid, "H100", 80 * GIB, 10 * GIB, 50, None, False)


def proc(pid: int, gib: int, uid: str | None, sm: int | None = None) -> Attributed:
    return Attributed(
        ProcessReading(pid, gib * GIB, None, None, sm, None if sm else "no-samples"), uid, "c1"
    )


def held(
    device: str,
    gpu_uuid: str,
    uid: str,
    name: str,
    replica: int | None = None,
    replicas: int | None = None,
) -> Held:
    return Held(
        device,
        "nvidia.com/gpu",
        "podresources",
        gpu_uuid,
        None,
        replica,
        replicas,
        "default",
        name,
        uid,
        "main",
    )


def reading(processes: list[tuple[str, Attributed]], held_: list[Held], gpus: int = 1) -> NodeUsage:
    found = tuple(gpu(u, i) for i, u in enumerate((G0, G1)[:gpus]))
    return NodeUsage("n1", "v", "2026-11-28T00:00:00Z", found, tuple(processes), tuple(held_))


PODS = [
    PodInfo("u1", "default", "one", {"c1": "main"}),
    PodInfo("u2", "default", "two", {"c1": "main"}),
]


def by_pod(rows: list[view.TopRow]) -> dict[str | None, view.TopRow]:
    return {r.pod: r for r in rows if r.kind == view.POD}


def test_a_whole_gpu_is_the_pods_and_its_memory_the_limit() -> None:
    rows = view.make(reading([(G0, proc(1, 4, "u1", 30))], [held(G0, G0, "u1", "one")]), PODS, None)
    one = by_pod(rows)["one"]
    assert one.limit == isolation.Limit(isolation.WHOLE, 80 * GIB)
    assert (one.memory_used, one.sm_percent, one.device) == (4 * GIB, 30, "gpu")


def test_mps_caps_each_replica_at_its_fraction() -> None:
    rows = view.make(
        reading([(G0, proc(1, 4, "u1", 30))], [held(f"{G0}::0", G0, "u1", "one", 0, 8)]),
        PODS,
        "mps",
    )
    limit = by_pod(rows)["one"].limit
    assert limit is not None and (limit.form, limit.memory, limit.thread_percent) == (
        "mps",
        10 * GIB,
        12,
    )


def test_time_slicing_names_the_neighbours_even_those_running_nothing() -> None:
    rows = view.make(
        reading(
            [(G0, proc(1, 4, "u1", 30))],
            [held(f"{G0}::0", G0, "u1", "one", 0, 4), held(f"{G0}::1", G0, "u2", "two", 1, 4)],
        ),
        PODS,
        "time-slicing",
    )
    pods = by_pod(rows)
    assert pods["one"].limit is not None and pods["one"].limit.neighbours == ("default/two",)
    assert pods["two"].memory_used == 0 and pods["two"].note == view.NO_PROCESS
    assert pods["two"].limit is not None and pods["two"].limit.form == "none"


def test_a_process_on_a_gpu_its_pod_was_not_given_is_flagged() -> None:
    rows = view.make(
        reading([(G1, proc(1, 4, "u1", 30))], [held(G0, G0, "u1", "one")], gpus=2), PODS, None
    )
    stray = next(r for r in rows if r.kind == view.POD and r.gpu_uuid == G1)
    assert stray.note == view.NOT_ALLOCATED and stray.device == "-"
    holder = next(r for r in rows if r.kind == view.POD and r.gpu_uuid == G0)
    assert holder.memory_used == 0  # its own GPU: it runs nothing there


def test_a_pods_processes_are_summed_and_a_gpus_total_is_never_a_pods() -> None:
    rows = view.make(
        reading(
            [(G0, proc(1, 4, "u1", 30)), (G0, proc(2, 2, "u1", 10)), (G0, proc(3, 1, None, 5))],
            [held(G0, G0, "u1", "one")],
        ),
        PODS,
        None,
    )
    one = by_pod(rows)["one"]
    assert (one.memory_used, one.sm_percent, one.pids) == (6 * GIB, 40, (1, 2))
    [total] = [r for r in rows if r.kind == view.GPU]
    assert total.memory_used == 10 * GIB and total.pod is None
    [stray] = [r for r in rows if r.kind == view.NO_POD]
    assert (
        stray.pids == (3,) and one.limit is not None and one.limit.form == "none"
    )  # pid 3 shares it


def test_each_container_is_charged_on_the_replica_it_holds() -> None:
    pods = [PodInfo("u1", "default", "one", {"c1": "first", "c2": "second"})]
    first = Held(f"{G0}::0", "nvidia.com/gpu", "podresources", G0, None, 0, 2,
                 "default", "one", "u1", "first")  # fmt: skip
    second = Held(f"{G0}::1", "nvidia.com/gpu", "podresources", G0, None, 1, 2,
                  "default", "one", "u1", "second")  # fmt: skip
    running = Attributed(ProcessReading(9, 3 * GIB, None, None, 20, None), "u1", "c2")
    rows = view.make(reading([(G0, running)], [first, second]), pods, "time-slicing")
    charged = {r.container: r for r in rows if r.kind == view.POD}
    assert charged["second"].device == "::1" and charged["second"].memory_used == 3 * GIB
    assert charged["first"].memory_used == 0 and charged["first"].note == view.NO_PROCESS
