"""`AllocResp` as kubelet keeps it in its checkpoint: a v1beta1 ContainerAllocateResponse
encoded by a hand-written protobuf encoder (wire types 0 and 2 only), independent of the
generated stubs the product decodes with, and NVIDIA's envvar answer. Must not write files."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tests.kit.node.kubelet.pods import AllocateResponse


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _string(number: int, text: str) -> bytes:
    # proto3 leaves fields at their default value off the wire
    return _length_delimited(number, text.encode()) if text else b""


def _bool(number: int, value: bool) -> bytes:
    return _varint(number << 3) + b"\x01" if value else b""


def _map(number: int, mapping: Mapping[str, str]) -> bytes:
    # a map is a repeated entry message {key = 1, value = 2}
    entries = (_string(1, key) + _string(2, value) for key, value in sorted(mapping.items()))
    return b"".join(_length_delimited(number, entry) for entry in entries)


def encode_alloc_resp(response: AllocateResponse) -> bytes:
    """Encode a v1beta1 ContainerAllocateResponse (docs/upstream-facts.md N2 field numbers)."""
    mounts = (
        _string(1, m.container_path) + _string(2, m.host_path) + _bool(3, m.read_only)
        for m in response.mounts
    )
    specs = (
        _string(1, d.container_path) + _string(2, d.host_path) + _string(3, d.permissions)
        for d in response.devices
    )
    return b"".join(
        [
            _map(1, response.envs),
            b"".join(_length_delimited(2, mount) for mount in mounts),
            b"".join(_length_delimited(3, spec) for spec in specs),
            _map(4, response.annotations),
            b"".join(_length_delimited(5, _string(1, name)) for name in response.cdi_devices),
        ]
    )


def nvidia_envvar_response(device_ids: Iterable[str]) -> AllocateResponse:
    """NVIDIA's plugin (envvar strategy): physical IDs, replica suffix removed, comma-joined."""
    physical = dict.fromkeys(device_id.split("::", 1)[0] for device_id in device_ids)
    return AllocateResponse(envs={"NVIDIA_VISIBLE_DEVICES": ",".join(physical)})
