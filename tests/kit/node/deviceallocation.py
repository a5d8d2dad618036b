"""The kubelet's device allocation at admission, asked of NVIDIA's device plugin over gRPC.

Owns what the kubelet's device manager does for a container's device requests once the plugin
is registered (k8s.io/kubernetes pkg/kubelet/cm/devicemanager): among the healthy devices no
other pod on the node holds, the plugin's GetPreferredAllocation (where it offers one), then its
Allocate; a refusal becomes the kubelet's admission failure `UnexpectedAdmissionError` with the
kubelet's wording ("Allocate failed due to rpc error: code = … desc = …, which is unexpected");
and the checkpoint form of the plugin's answer. Must not choose devices itself (the plugin
does) or write to the store.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import grpc

from tests.kit.node.allocation import Allocation, AllocationTable, Rejected
from tests.kit.node.devicemanager import DeviceManager

# (pod UID, container, resource) -> the plugin's ContainerAllocateResponse
Responses = dict[tuple[str, str, str], Any]
# grpc-go's names of the codes that differ from Python's upper-case ones joined (codes.Code)
_GO_CODES = {"CANCELLED": "Canceled"}


def allocate(
    manager: DeviceManager,
    allocations: list[Allocation],
    table: AllocationTable,
    responses: Responses,
) -> list[Allocation]:
    """Each allocation with the device IDs the plugin chose and allocated (its answers kept in
    `responses`), or Rejected as the kubelet rejects the pod."""
    node = manager.node
    healthy = manager.healthy()
    chosen: list[Allocation] = []
    for allocation in allocations:
        held = table.in_use(node, allocation.resource)
        held.update(i for a in chosen if a.resource == allocation.resource for i in a.device_ids)
        available = [d for d in healthy.get(allocation.resource, []) if d not in held]
        try:
            ids, response = manager.allocate(
                allocation.resource, available, len(allocation.device_ids)
            )
        except (LookupError, grpc.RpcError) as exc:
            detail = go_status(exc) if isinstance(exc, grpc.RpcError) else str(exc)
            raise Rejected(
                "UnexpectedAdmissionError", f"Allocate failed due to {detail}, which is unexpected"
            ) from exc
        done = replace(allocation, device_ids=tuple(ids))
        responses[(done.pod_uid, done.container, done.resource)] = response
        chosen.append(done)
    return chosen


def go_status(error: grpc.RpcError) -> str:
    """A gRPC error as grpc-go's status error prints it, which the kubelet's message embeds."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    name = code.name
    go_name = _GO_CODES.get(name) or "".join(part.capitalize() for part in name.split("_"))
    details = error.details() if hasattr(error, "details") else str(error)
    return f"rpc error: code = {go_name} desc = {details}"


def checkpoint_response(message: Any) -> Any:
    """NVIDIA's ContainerAllocateResponse as the kubelet stand-in stores it in its checkpoint."""
    from tests.kit.node import kubelet

    return kubelet.AllocateResponse(
        envs=dict(message.envs),
        mounts=tuple(
            kubelet.Mount(m.container_path, m.host_path, m.read_only) for m in message.mounts
        ),
        devices=tuple(
            kubelet.DeviceSpec(d.container_path, d.host_path, d.permissions)
            for d in message.devices
        ),
        annotations=dict(message.annotations),
        cdi_devices=tuple(c.name for c in message.cdi_devices),
    )
