"""The agent's bounded ring of samples per held device, and `top --idle`'s verdicts.

The agent samples, every interval, what each held device's pod uses (memory and SM % of
its own processes) and keeps the last `capacity` samples per device, so `top --idle 30m`
can name the pods that hold GPU devices and used nothing over the window without anything
sent or stored elsewhere. Owns the ring (`Ring`: oldest samples dropped, at most
`MAX_DEVICES` devices, so its memory is bounded: docs/top.md states it), its JSON form
(`GPUIdleSamples`), reading that back, and deciding which holders were idle. Times are
seconds since the epoch, passed in (no clock here). Pure: standard library only.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from kubectl_gpu.usage import document
from kubectl_gpu.usage.readings import SM_MIG

KIND = "GPUIdleSamples"
MAX_DEVICES = 512  # held device IDs tracked on one node; beyond it new ones are not
MAX_SAMPLES = 240  # per device (4 hours at one a minute), whatever the agent is told


@dataclasses.dataclass(frozen=True)
class Holder:
    """Who holds a device: the device ID and the pod and container holding it."""

    device_id: str
    namespace: str | None
    pod: str | None
    pod_uid: str | None
    container: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class Sample:
    """One look at a held device: when, and what its holder's processes used."""

    at: float
    memory: int | None
    sm_percent: int | None
    sm_unavailable: str | None = None


class Ring:
    """The last `capacity` samples of every held device (not thread-safe: the agent locks)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, min(capacity, MAX_SAMPLES))
        self._rings: dict[Holder, collections.deque[Sample]] = {}

    def add(self, taken: Iterable[tuple[Holder, Sample]]) -> None:
        """Record one round of samples; a device no longer held is forgotten."""
        seen = set()
        for holder, sample in taken:
            seen.add(holder)
            ring = self._rings.get(holder)
            if ring is None:
                if len(self._rings) >= MAX_DEVICES:
                    continue
                ring = self._rings[holder] = collections.deque(maxlen=self.capacity)
            ring.append(sample)
        for gone in set(self._rings) - seen:
            del self._rings[gone]

    def items(self) -> list[tuple[Holder, tuple[Sample, ...]]]:
        """Every device's samples, oldest first."""
        return [(h, tuple(r)) for h, r in self._rings.items()]


def to_dict(node: str, read_at: str, interval: float, ring: Ring) -> dict[str, Any]:
    """The `/v1/idle` document (docs/top.md)."""
    return {
        "apiVersion": document.API_VERSION,
        "kind": KIND,
        "node": node,
        "readAt": read_at,
        "intervalSeconds": interval,
        "capacity": ring.capacity,
        "devices": [
            {
                "deviceID": h.device_id,
                "namespace": h.namespace,
                "pod": h.pod,
                "podUID": h.pod_uid,
                "container": h.container,
                "samples": [[s.at, s.memory, s.sm_percent, s.sm_unavailable] for s in samples],
            }
            for h, samples in ring.items()
        ],
    }


def from_dict(doc: Any) -> list[tuple[Holder, tuple[Sample, ...]]]:
    """The devices and samples of a `/v1/idle` answer; `UsageDocumentError` when malformed."""
    if not isinstance(doc, Mapping) or doc.get("kind") != KIND:
        raise document.UsageDocumentError(f"the answer is not a {KIND} document")
    if doc.get("apiVersion") != document.API_VERSION:
        raise document.UsageDocumentError(f"the answer is not {document.API_VERSION}")
    try:
        devices = document._bounded(doc, "devices", MAX_DEVICES)
        return [(_holder(d), _samples(d)) for d in devices]
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise document.UsageDocumentError(f"the answer does not have the {KIND} shape: {e}") from e


def _holder(d: Mapping[str, Any]) -> Holder:
    o = document._opt
    return Holder(
        str(d["deviceID"]),
        o(d.get("namespace")),
        o(d.get("pod")),
        o(d.get("podUID")),
        o(d.get("container")),
    )


def _samples(d: Mapping[str, Any]) -> tuple[Sample, ...]:
    raw = document._bounded(d, "samples", MAX_SAMPLES)
    return tuple(
        Sample(float(s[0]), document._int(s[1]), document._int(s[2]), document._opt(s[3]))
        for s in raw
    )


@dataclasses.dataclass(frozen=True)
class Idle:
    """A holder that used nothing over the window: how much of the window the samples
    cover (seconds) and whether SM could be told at all (not on MIG: memory decides)."""

    holder: Holder
    covered: float
    samples: int
    sm_known: bool


def idle(
    devices: Iterable[tuple[Holder, tuple[Sample, ...]]], now: float, window: float
) -> list[Idle]:
    """The holders none of whose samples in the last `window` seconds shows use: no SM %
    above 0 and, where SM cannot be read (MIG), no memory held. A holder whose samples do not
    reach back over the window is left out: it has not been watched long enough."""
    found = []
    for holder, samples in devices:
        recent = [s for s in samples if s.at >= now - window]
        if not recent or recent[0].at - (now - window) > _slack(samples):
            continue
        if any(_active(s) for s in recent):
            continue
        sm_known = not any(s.sm_unavailable == SM_MIG for s in recent)
        found.append(Idle(holder, now - recent[0].at, len(recent), sm_known))
    return found


def _slack(samples: tuple[Sample, ...]) -> float:
    """One sampling interval: how late the first sample of a window may be."""
    if len(samples) < 2:
        return 0.0
    return max(b.at - a.at for a, b in zip(samples, samples[1:], strict=False))


def _active(s: Sample) -> bool:
    if s.sm_percent is not None:
        return s.sm_percent > 0
    return s.sm_unavailable == SM_MIG and bool(s.memory)
