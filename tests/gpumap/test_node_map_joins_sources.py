"""`join.make`: allocations × pods × GPUs become rows resolved to physical GPUs, and the sources'
disagreements become findings a user can act on."""

from __future__ import annotations

from kubectl_gpu.gpumap import join
from kubectl_gpu.gpumap.allocations import (
    AllocateResponse,
    Allocation,
    Gpu,
    MigDevice,
    PodRef,
    RegisteredDevices,
    Source,
    group_devices,
    sorted_pairs,
)
from kubectl_gpu.gpumap.join import NodeSources

GPU0 = "GPU-11ba558d-3437-2335-2fd8-a78c8502f87f"
GPU1 = "GPU-4f2c7e1a-9b3d-4c8e-a1f0-6d5b2e8c9a17"
MIG_A = "MIG-6e1b7c2a-4d3f-5a8e-9b0c-1f2d3e4a5b6c"
MIG_B = "MIG-9c8d7e6f-5a4b-5c3d-8e2f-0a1b2c3d4e5f"
UID_A, UID_B, UID_C = "uid-a", "uid-b", "uid-c"
INVENTORY = (
    Gpu(0, GPU0, "NVIDIA A100-SXM4-40GB", minor=2, mig_devices=(MigDevice(MIG_A, "1g.5gb", 7, 0),)),
    Gpu(1, GPU1, "NVIDIA A10G", minor=0),
)


def held(
    uid: str | None,
    ids: tuple[str, ...],
    resource: str = "nvidia.com/gpu",
    container: str = "main",
    source: Source = Source.CHECKPOINT,
    **names: str,
) -> Allocation:
    response = AllocateResponse(
        envs=sorted_pairs(
            {"NVIDIA_VISIBLE_DEVICES": ",".join(dict.fromkeys(i.split("::")[0] for i in ids))}
        )
    )
    return Allocation(
        uid,
        names.get("namespace"),
        names.get("pod"),
        container,
        resource,
        ids,
        source,
        response if source is Source.CHECKPOINT else None,
    )


def live(namespace: str, pod: str, ids: tuple[str, ...], container: str = "main") -> Allocation:
    return held(
        None, ids, container=container, source=Source.PODRESOURCES, namespace=namespace, pod=pod
    )


def registered(
    *ids: str, resource: str = "nvidia.com/gpu", source: Source = Source.CHECKPOINT
) -> RegisteredDevices:
    return group_devices(((resource, i) for i in ids), source)


def codes(node_map: join.NodeMap) -> list[str]:
    return [f.code for f in node_map.findings]


# --- offline: the checkpoint alone ----------------------------------------------------------------


def test_offline_rows_carry_the_uuid_in_the_id_and_no_index_or_model() -> None:
    sources = NodeSources(checkpoint=(held(UID_A, (GPU0,)),), registered=registered(GPU0))

    (row,) = join.make(sources).rows

    assert (row.gpu_uuid, row.gpu_index, row.gpu_model) == (GPU0, None, None)
    assert (row.pod_uid, row.namespace, row.pod, row.container) == (UID_A, None, None, "main")
    assert (row.device_id, row.source, row.replica) == (GPU0, "checkpoint", None)


def test_time_sliced_replicas_all_resolve_to_their_one_gpu() -> None:
    entries = (
        held(UID_A, (f"{GPU1}::0",)),
        held(UID_B, (f"{GPU1}::1",)),
        held(UID_C, (f"{GPU1}::2", f"{GPU1}::3")),
    )
    replicas = tuple(f"{GPU1}::{n}" for n in range(4))

    node_map = join.make(NodeSources(checkpoint=entries, registered=registered(*replicas)))

    assert [(r.gpu_uuid, r.replica, r.pod_uid) for r in node_map.rows] == [
        (GPU1, 0, UID_A),
        (GPU1, 1, UID_B),
        (GPU1, 2, UID_C),
        (GPU1, 3, UID_C),
    ]
    assert node_map.findings == () and node_map.free == ()


def test_offline_mig_rows_show_what_the_id_and_resource_say() -> None:
    entries = (
        held(UID_A, (MIG_A,), resource="nvidia.com/mig-1g.5gb"),
        held(UID_B, (f"MIG-{GPU0}/3/0",), resource="nvidia.com/mig-2g.10gb.shared"),
    )

    rows = {r.pod_uid: r for r in join.make(NodeSources(checkpoint=entries)).rows}

    opaque, legacy = rows[UID_A], rows[UID_B]
    assert (opaque.gpu_uuid, opaque.mig_uuid, opaque.mig_profile) == (None, MIG_A, "1g.5gb")
    assert (legacy.gpu_uuid, legacy.gpu_instance, legacy.compute_instance) == (GPU0, 3, 0)
    assert legacy.mig_profile == "2g.10gb"


def test_a_pod_list_names_checkpoint_pods_and_tells_the_node() -> None:
    pods = [PodRef(UID_A, "ml", "trainer-0", node="gpu-node-1")]
    sources = NodeSources(checkpoint=(held(UID_A, (GPU0,)),))

    node_map = join.make(sources, pods)

    (row,) = node_map.rows
    assert (row.namespace, row.pod, row.pod_uid, row.node) == (
        "ml",
        "trainer-0",
        UID_A,
        "gpu-node-1",
    )


def test_a_given_node_name_wins_over_the_pods_node() -> None:
    pods = [PodRef(UID_A, "ml", "trainer-0", node="elsewhere")]
    sources = NodeSources(node="gpu-node-1", checkpoint=(held(UID_A, (GPU0,)),))

    assert join.make(sources, pods).rows[0].node == "gpu-node-1"


def test_an_entry_for_a_pod_missing_from_the_pod_list_is_flagged_stale() -> None:
    pods = [PodRef(UID_A, "ml", "trainer-0")]
    sources = NodeSources(checkpoint=(held(UID_A, (GPU0,)), held(UID_B, (GPU1,))))

    node_map = join.make(sources, pods)

    assert codes(node_map) == ["map.stale-checkpoint-entry"]
    assert UID_B in node_map.findings[0].message and GPU1 in node_map.findings[0].message
    assert len(node_map.rows) == 2  # offline the checkpoint is all there is: shown, and flagged


# --- with an NVML inventory -----------------------------------------------------------------------


def test_the_inventory_adds_index_model_and_a_mig_devices_parent() -> None:
    entries = (
        held(UID_A, (f"{GPU1}::1",)),
        held(UID_B, (MIG_A,), resource="nvidia.com/mig-1g.5gb"),
    )

    rows = {
        r.pod_uid: r for r in join.make(NodeSources(checkpoint=entries), inventory=INVENTORY).rows
    }

    assert (rows[UID_A].gpu_index, rows[UID_A].gpu_model, rows[UID_A].replica) == (
        1,
        "NVIDIA A10G",
        1,
    )
    mig = rows[UID_B]
    assert (mig.gpu_index, mig.gpu_uuid, mig.mig_uuid) == (0, GPU0, MIG_A)
    assert (mig.mig_profile, mig.gpu_instance, mig.compute_instance) == ("1g.5gb", 7, 0)


def test_legacy_and_gke_ids_find_their_mig_device_by_instance() -> None:
    entries = (
        held(UID_A, (f"MIG-{GPU0}/7/0",), resource="nvidia.com/mig-1g.5gb"),
        held(UID_B, ("nvidia2/gi7/vgpu1",)),
        held(UID_C, ("nvidia0",)),
    )

    rows = {
        r.pod_uid: r for r in join.make(NodeSources(checkpoint=entries), inventory=INVENTORY).rows
    }

    assert (rows[UID_A].mig_uuid, rows[UID_A].gpu_index) == (MIG_A, 0)
    assert (rows[UID_B].gpu_uuid, rows[UID_B].mig_uuid, rows[UID_B].replica) == (GPU0, MIG_A, 1)
    assert rows[UID_C].gpu_uuid == GPU1  # nvidia0 is /dev/nvidia0: minor 0, NVML index 1


def test_tegra_is_the_one_gpu_of_a_jetson() -> None:
    jetson = [Gpu(0, "GPU-00000000-0000-0000-0000-000000000001", "Orin")]
    sources = NodeSources(checkpoint=(held(UID_A, ("tegra",)),))

    (row,) = join.make(sources, inventory=jetson).rows

    assert (row.gpu_index, row.gpu_model) == (0, "Orin")


def test_rows_are_ordered_by_gpu_index_then_replica() -> None:
    entries = (held(UID_A, (f"{GPU1}::1",)), held(UID_B, (GPU0,)), held(UID_C, (f"{GPU1}::0",)))

    rows = join.make(NodeSources(checkpoint=entries), inventory=INVENTORY).rows

    assert [(r.gpu_index, r.replica) for r in rows] == [(0, None), (1, 0), (1, 1)]


def test_ids_not_on_the_nodes_gpus_are_flagged() -> None:
    gone = "GPU-00000000-1111-2222-3333-444444444444"
    sources = NodeSources(checkpoint=(held(UID_A, (gone,)), held(UID_B, (MIG_B,))))

    node_map = join.make(sources, inventory=INVENTORY)

    assert codes(node_map) == ["map.device-not-on-node", "map.device-not-on-node"]
    assert {r.gpu_index for r in node_map.rows} == {None}


def test_an_unknown_id_form_is_shown_as_is_and_flagged() -> None:
    sources = NodeSources(checkpoint=(held(UID_A, ("0000:3b:00.0",), resource="example.com/fpga"),))

    node_map = join.make(sources)

    assert [(r.device_id, r.gpu_uuid) for r in node_map.rows] == [("0000:3b:00.0", None)]
    assert codes(node_map) == ["map.unknown-device-id"]


# --- the two kubelet sources together -------------------------------------------------------------


def test_podresources_rows_get_the_checkpoints_uid_through_the_pod_list() -> None:
    pods = [PodRef(UID_A, "ml", "trainer-0")]
    sources = NodeSources(
        checkpoint=(held(UID_A, (GPU0,)),), podresources=(live("ml", "trainer-0", (GPU0,)),)
    )

    (row,) = join.make(sources, pods).rows

    assert (row.source, row.namespace, row.pod, row.pod_uid) == (
        "podresources",
        "ml",
        "trainer-0",
        UID_A,
    )


def test_a_checkpoint_entry_kubelet_no_longer_runs_is_flagged_and_not_shown() -> None:
    sources = NodeSources(
        checkpoint=(held(UID_A, (GPU0,)), held(UID_B, (GPU1,))),
        podresources=(live("ml", "trainer-0", (GPU0,)),),
    )

    node_map = join.make(sources)

    assert [(r.pod, r.device_id) for r in node_map.rows] == [("trainer-0", GPU0)]
    assert codes(node_map) == ["map.stale-checkpoint-entry"]
    assert UID_B in node_map.findings[0].message


def test_an_init_containers_entry_for_the_same_devices_is_not_stale() -> None:
    sources = NodeSources(
        checkpoint=(held(UID_A, (GPU0,), container="setup"), held(UID_A, (GPU0,))),
        podresources=(live("ml", "trainer-0", (GPU0,)),),
    )

    node_map = join.make(sources)

    assert [r.container for r in node_map.rows] == ["main"]
    assert node_map.findings == ()


def test_a_registered_device_that_is_not_allocatable_is_unhealthy() -> None:
    sources = NodeSources(
        registered=registered(GPU0, GPU1),
        podresources=(),
        allocatable=registered(GPU0, source=Source.PODRESOURCES),
    )

    node_map = join.make(sources)

    assert codes(node_map) == ["map.device-unhealthy"]
    assert GPU1 in node_map.findings[0].message


def test_a_held_device_that_is_not_allocatable_is_unhealthy() -> None:
    sources = NodeSources(
        podresources=(live("ml", "trainer-0", (GPU1,)),),
        allocatable=registered(GPU0, source=Source.PODRESOURCES),
    )

    node_map = join.make(sources)

    assert codes(node_map) == ["map.device-unhealthy"]
    assert "ml/trainer-0" in node_map.findings[0].message


def test_offline_a_held_device_kubelet_did_not_register_is_unhealthy() -> None:
    sources = NodeSources(checkpoint=(held(UID_A, (GPU1,)),), registered=registered(GPU0))

    assert codes(join.make(sources)) == ["map.device-unhealthy"]


def test_an_alloc_resp_naming_other_devices_is_flagged() -> None:
    wrong = AllocateResponse(envs=sorted_pairs({"NVIDIA_VISIBLE_DEVICES": GPU1}))
    entry = Allocation(
        UID_A, None, None, "main", "nvidia.com/gpu", (GPU0,), Source.CHECKPOINT, wrong
    )

    node_map = join.make(NodeSources(checkpoint=(entry,)))

    assert codes(node_map) == ["map.alloc-resp-disagrees"]
    assert GPU0 in node_map.findings[0].message and GPU1 in node_map.findings[0].message


def test_an_alloc_resp_with_indices_cannot_be_compared_and_is_not_flagged() -> None:
    by_index = AllocateResponse(envs=sorted_pairs({"NVIDIA_VISIBLE_DEVICES": "0"}))
    entry = Allocation(
        UID_A, None, None, "main", "nvidia.com/gpu", (GPU0,), Source.CHECKPOINT, by_index
    )

    assert join.make(NodeSources(checkpoint=(entry,))).findings == ()


def test_a_device_held_by_two_pods_is_flagged() -> None:
    sources = NodeSources(checkpoint=(held(UID_A, (GPU0,)), held(UID_B, (GPU0,))))

    node_map = join.make(sources)

    assert codes(node_map) == ["map.device-held-twice"]
    assert UID_A in node_map.findings[0].message and UID_B in node_map.findings[0].message


# --- free devices ---------------------------------------------------------------------------------


def test_free_rows_are_the_registered_devices_nobody_holds() -> None:
    replicas = tuple(f"{GPU1}::{n}" for n in range(4))
    sources = NodeSources(
        checkpoint=(held(UID_A, replicas[:1]), held(UID_B, replicas[2:3])),
        registered=registered(*replicas),
    )

    free = join.make(sources).free

    assert [(r.device_id, r.replica, r.gpu_uuid) for r in free] == [
        (replicas[1], 1, GPU1),
        (replicas[3], 3, GPU1),
    ]
    assert {(r.pod, r.pod_uid, r.container, r.source) for r in free} == {
        (None, None, None, "checkpoint")
    }


def test_allocatable_devices_are_what_is_free_when_kubelet_was_asked() -> None:
    sources = NodeSources(
        registered=registered(GPU0, GPU1),
        podresources=(),
        allocatable=registered(GPU0, source=Source.PODRESOURCES),
    )

    assert [(r.device_id, r.source) for r in join.make(sources).free] == [(GPU0, "podresources")]


def test_rows_render_as_dicts_with_every_key() -> None:
    (row,) = join.make(NodeSources(checkpoint=(held(UID_A, (GPU0,)),))).rows

    document = row.to_dict()

    assert list(document)[:3] == ["node", "gpu_index", "gpu_uuid"]
    assert document["pod"] is None and document["source"] == "checkpoint"


def test_a_device_gone_after_a_repartition_is_not_called_unhealthy() -> None:
    # A forced `mig apply` destroyed MIG_B under a running pod and made MIG_A: the pod's
    # device no longer exists (NVML lists MIG_A only); it is not a sick device.
    mig = "nvidia.com/mig-1g.5gb"
    pod = held(None, (MIG_B,), mig, source=Source.PODRESOURCES, namespace="ml", pod="trainer-0")
    sources = NodeSources(
        registered=registered(MIG_B, resource=mig),
        podresources=(pod,),
        allocatable=registered(MIG_A, resource=mig, source=Source.PODRESOURCES),
    )

    node_map = join.make(sources, inventory=INVENTORY)

    assert "map.device-unhealthy" not in codes(node_map)
    assert codes(node_map) == ["map.device-not-on-node"]
    assert "re-partitioned" in node_map.findings[0].hint
