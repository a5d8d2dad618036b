"""The DRA half of a scheduler, as one step a test calls: allocate every pending simple
ResourceClaim against the published ResourceSlices, and serve `nvidia.com/gpu` requests of
pods on DRA nodes through a claim made for them (KEP-5004).

Owns the allocation a real scheduler writes: results `(request, driver, pool, device)`, the
firstAvailable alternative tried in order (`<request>/<alternative>`), a `shareID` and
`consumedCapacity` on a device that allows several allocations, counters taken from a
partitionable GPU's counter set, the configs copied from the classes (FromClass) and the
claim (FromClaim), the node selector, and `reservedFor` the pods that use the claim.
Device classes are matched on the `type` their selector compares, as the NVIDIA chart's
classes are written; selectors of requests are not evaluated. Must not publish slices.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

from tests.kit.plane.store import ApiStore

Obj = dict[str, Any]
DRIVER = "gpu.nvidia.com"
_TYPE = re.compile(r"\.type\s*==\s*'(\w+)'")
_GI = 1024**3


class Unsatisfiable(AssertionError):
    """No published device fits a claim (a real scheduler would leave it pending)."""


def allocate(store: ApiStore) -> list[str]:
    """Allocate every claim without an allocation; returns `namespace/name` of each."""
    state = _Devices(store)
    done = []
    for claim in store.list("resourceclaims"):
        if (claim.get("status") or {}).get("allocation"):
            continue
        pods = _users(store, claim)
        node = next((p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")), None)
        claim["status"] = {
            "allocation": _allocation(store, state, claim, node),
            "reservedFor": [
                {"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}
                for p in pods
            ],
        }
        store.update_status(claim)
        done.append(f"{claim['metadata']['namespace']}/{claim['metadata']['name']}")
    return done


def serve_extended_resource(store: ApiStore, namespace: str, pod_name: str, version: str) -> Obj:
    """Give a bound pod's `nvidia.com/gpu` limits a claim, as kube-scheduler does for a node
    whose GPUs only the DRA driver serves; returns the claim."""
    pod = store.get("pods", pod_name, namespace)
    requests, mappings = [], []
    for c, container in enumerate(pod["spec"]["containers"]):
        count = int(((container.get("resources") or {}).get("limits") or {}).get(
            "nvidia.com/gpu", 0))  # fmt: skip
        if count:
            name = f"container-{c}-request-0"
            exact = {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount",
                     "count": count}  # fmt: skip
            requests.append({"name": name, "exactly": exact})
            mappings.append({"containerName": container["name"], "requestName": name,
                             "resourceName": "nvidia.com/gpu"})  # fmt: skip
    claim = store.create(
        {
            "apiVersion": f"resource.k8s.io/{version}",
            "kind": "ResourceClaim",
            "metadata": {
                "name": f"{pod_name}-extended-resources-sim",
                "namespace": namespace,
                "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": pod_name,
                        "uid": pod["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },  # fmt: skip
            "spec": {"devices": {"requests": requests}},
        }
    )
    pod.setdefault("status", {})["extendedResourceClaimStatus"] = {
        "resourceClaimName": claim["metadata"]["name"],
        "requestMappings": mappings,
    }
    store.update_status(pod)
    allocate(store)
    return store.get("resourceclaims", claim["metadata"]["name"], namespace)


class _Devices:
    """Published devices and what is already allocated (whole devices, counters, shares)."""

    def __init__(self, store: ApiStore) -> None:
        self.devices: list[Obj] = []
        self.totals: dict[tuple[str, str, str], float] = {}
        for found in store.list("resourceslices", field_selector=f"spec.driver={DRIVER}"):
            spec = found["spec"]
            for counter_set in spec.get("sharedCounters") or []:
                for counter, value in counter_set["counters"].items():
                    key = (spec["pool"]["name"], counter_set["name"], counter)
                    self.totals[key] = _quantity(value["value"])
            for raw in spec.get("devices") or []:
                fields = raw.get("basic") or raw
                self.devices.append({**fields, "name": raw["name"], "node": spec["nodeName"],
                                     "pool": spec["pool"]["name"]})  # fmt: skip
        self.taken: set[tuple[str, str]] = set()
        self.used: dict[tuple[str, str, str], float] = {}
        for claim in store.list("resourceclaims"):
            results = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
            for result in results.get("results") or []:
                device = self.find(result["pool"], result["device"])
                if device is not None:
                    self.take(device)

    def find(self, pool: str, name: str) -> Obj | None:
        return next((d for d in self.devices if (d["pool"], d["name"]) == (pool, name)), None)

    def candidates(self, kind: str, node: str | None) -> Iterator[Obj]:
        for device in self.devices:
            if node and device["node"] != node:
                continue
            if device["attributes"]["type"]["string"] == kind and self.free(device):
                yield device

    def free(self, device: Obj) -> bool:
        if device.get("allowMultipleAllocations"):
            return True
        if (device["pool"], device["name"]) in self.taken:
            return False
        return all(
            self.used.get((device["pool"], c["counterSet"], name), 0) + _quantity(v["value"])
            <= self.totals.get((device["pool"], c["counterSet"], name), 0)
            for c in device.get("consumesCounters") or []
            for name, v in c["counters"].items()
        )

    def take(self, device: Obj) -> None:
        if device.get("allowMultipleAllocations"):
            return
        self.taken.add((device["pool"], device["name"]))
        for c in device.get("consumesCounters") or []:
            for name, v in c["counters"].items():
                key = (device["pool"], c["counterSet"], name)
                self.used[key] = self.used.get(key, 0) + _quantity(v["value"])


def _allocation(store: ApiStore, state: _Devices, claim: Obj, node: str | None) -> Obj:
    spec = claim["spec"]["devices"]
    results: list[Obj] = []
    configs: list[Obj] = []
    for request in spec["requests"]:
        chosen = _choose(store, state, request, node, claim["metadata"]["name"])
        node = node or chosen[0]
        results += chosen[1]
        configs += chosen[2]
    for config in spec.get("config") or []:
        configs.append({"source": "FromClaim", "requests": config.get("requests") or [],
                        "opaque": config["opaque"]})  # fmt: skip
    selector = {"key": "metadata.name", "operator": "In", "values": [node]}
    return {
        "devices": {"results": results, "config": configs},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [selector]}]},
    }


def _choose(
    store: ApiStore, state: _Devices, request: Obj, node: str | None, claim: str
) -> tuple[str, list[Obj], list[Obj]]:
    """The first alternative (or the exact request) that fits: (node, results, configs)."""
    options = [(f"{request['name']}/{a['name']}", a) for a in request.get("firstAvailable") or []]
    options = options or [(request["name"], request.get("exactly") or request)]
    for name, exact in options:
        cls = store.get("deviceclasses", exact["deviceClassName"])
        kind = _TYPE.search(cls["spec"]["selectors"][0]["cel"]["expression"])
        shares = bool((exact.get("capacity") or {}).get("requests"))
        wanted = kind.group(1) if kind else "gpu"
        picked = _pick(state, wanted, int(exact.get("count", 1)), node, shares)
        if picked:
            results = [_result(name, d, exact, claim) for d in picked]
            configs = [{"source": "FromClass", "requests": [name], "opaque": c["opaque"]}
                       for c in cls["spec"].get("config") or []]  # fmt: skip
            return picked[0]["node"], results, configs
    raise Unsatisfiable(f"no published device fits request {request['name']} of claim {claim}")


def _pick(state: _Devices, kind: str, count: int, node: str | None, shares: bool) -> list[Obj]:
    """`count` free devices of `kind` on one node; a request for capacity takes only devices
    that allow several allocations (a simplification: a real scheduler may also use a whole
    device for it)."""
    nodes = [node] if node else sorted({d["node"] for d in state.devices})
    for candidate in nodes:
        picked: list[Obj] = []
        for device in state.candidates(kind, candidate):
            if shares and not device.get("allowMultipleAllocations"):
                continue
            if len(picked) < count:
                state.take(device)
                picked.append(device)
        if len(picked) == count:
            return picked
    return []


def _result(request: str, device: Obj, exact: Obj, claim: str) -> Obj:
    result = {"request": request, "driver": DRIVER, "pool": device["pool"],
              "device": device["name"]}  # fmt: skip
    if device.get("allowMultipleAllocations"):
        wanted = ((exact.get("capacity") or {}).get("requests") or {}).get("memory", "1Gi")
        result["shareID"] = str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{claim}.{device['name']}"))
        result["consumedCapacity"] = {"memory": wanted}
    return result


def _users(store: ApiStore, claim: Obj) -> list[Obj]:
    name, namespace = claim["metadata"]["name"], claim["metadata"]["namespace"]
    found = []
    for pod in store.list("pods", namespace):
        named = [c.get("resourceClaimName") for c in pod["spec"].get("resourceClaims") or []]
        status = pod.get("status") or {}
        named += [c.get("resourceClaimName") for c in status.get("resourceClaimStatuses") or []]
        named.append((status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName"))
        if name in named:
            found.append(pod)
    return found


def _quantity(text: str) -> float:
    units = {"Ki": 1024, "Mi": 1024**2, "Gi": _GI, "Ti": 1024**4}
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    return float(text)
