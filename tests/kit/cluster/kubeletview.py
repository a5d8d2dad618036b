"""What a simulated cluster's kubelets know and show: a base of `SimCluster`.

Owns `KubeletView`: each node's device allocations, the device IDs the running device plugin
advertised, the node's PodResources answers (devices, NVIDIA's Allocate answers, the DRA claims
NVIDIA's kubelet plugin prepared), the device plugin's pod on a node (its processes' state, its
log, restarting it) and the containers' logs the nodes keep (`keep_log`). Must not start or
stop anything (cluster.py does) or hold controller logic.
"""

from __future__ import annotations

import time
import urllib.parse
from typing import TYPE_CHECKING, Any

from tests.kit.kube import ApiError
from tests.kit.kube.layouts import Layout
from tests.kit.node.allocation import Allocation
from tests.kit.node.podlifecycle import Kubelet
from tests.kit.node.programs import ProgramPod

if TYPE_CHECKING:
    from tests.kit.node.draplugin import DraKubelet
    from tests.kit.node.nvidiaplugin import NvidiaPluginRuntime
    from tests.kit.plane.containerlogs import LogStore
    from tests.kit.plane.store import ApiStore

Obj = dict[str, Any]


class KubeletView:
    """The test-facing handles on what the nodes' kubelets know (`SimCluster` sets what is
    declared here)."""

    store: ApiStore
    logs: LogStore
    layout: Layout | None
    kubelet: Kubelet
    nvidia_plugin: NvidiaPluginRuntime
    dra_kubelet: DraKubelet | None

    def settle(self, timeout: float = 5.0) -> None:
        raise NotImplementedError  # SimCluster's

    def allocations(self, node: str) -> list[Allocation]:
        """Kubelet's device assignments on `node` (pod UID, container, resource, device IDs)."""
        return self.kubelet.table.of_node(node)

    def advertised(self, node: str) -> dict[str, tuple[str, ...]]:
        """Device IDs the running plugin on `node` registered, per resource."""
        return self.nvidia_plugin.devices(node)

    def podresources(self, node: str) -> tuple[list[Any], Any]:
        """`node`'s pods with their devices, and its healthy devices, as the kubelet stand-in
        (tests/kit/node/kubelet.py) takes them: `set_pods(pods)`, `set_allocatable(allocatable)`."""
        from tests.kit.node import kubelet as podresources  # lazy: it imports grpc and the stubs

        devices: dict[tuple[str, str], list[Any]] = {}
        for allocation in self.allocations(node):
            key = (allocation.pod_uid, allocation.container)
            devices.setdefault(key, []).append(
                podresources.Devices(allocation.resource, allocation.device_ids)
            )
        pods = []
        for pod in self.store.list("pods", field_selector=f"spec.nodeName={node}"):
            meta = pod["metadata"]
            if (pod.get("status") or {}).get("phase") != "Running":
                continue
            claims = self._prepared_claims(pod)
            containers = tuple(
                podresources.Container(
                    c["name"],
                    tuple(devices.get((meta["uid"], c["name"]), ())),
                    alloc_resp=self._alloc_resp(meta["uid"], c["name"]),
                    claims=claims.get(c["name"], ()),
                )
                for c in pod["spec"]["containers"]
            )
            pods.append(podresources.Pod(meta["name"], meta["namespace"], containers, meta["uid"]))
        healthy = tuple(podresources.Devices(r, ids) for r, ids in self.advertised(node).items())
        return pods, podresources.Allocatable(devices=healthy)

    def pods_in_api(self, node: str) -> set[tuple[str, str]]:
        """(namespace, name) of `node`'s pods the API server has now: all a kubelet's
        PodResources List may report (its pods leave the API only after they stopped)."""
        found = self.store.list("pods", field_selector=f"spec.nodeName={node}")
        return {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in found}

    def _prepared_claims(self, pod: Obj) -> dict[str, tuple[Any, ...]]:
        """Container -> the DRA claims NVIDIA's kubelet plugin prepared for it (PodResources)."""
        if self.dra_kubelet is None:
            return {}
        from tests.kit.node.draplugin import podresources_claims

        return podresources_claims(self.dra_kubelet, pod)

    def _alloc_resp(self, uid: str, container: str) -> Any:
        """What NVIDIA's plugin answered Allocate for a container (None: it answered none).
        The kubelet stand-in keeps one answer per container."""
        from tests.kit.node.deviceallocation import checkpoint_response

        found = [
            r for (u, c, _), r in self.nvidia_plugin.responses.items() if (u, c) == (uid, container)
        ]
        return checkpoint_response(found[0]) if found else None

    def plugin_pod(self, node: str) -> Obj | None:
        if self.layout is None:
            return None
        pods = self.store.list(
            "pods",
            self.layout.namespace,
            label_selector=self.layout.plugin_selector,
            field_selector=f"spec.nodeName={node}",
        )
        container = self.layout.plugin_container
        found = [p for p in pods if any(c["name"] == container for c in p["spec"]["containers"])]
        return found[0] if found else None

    def plugin_state(self, node: str) -> ProgramPod | None:
        """The plugin pod's processes on `node`: selected key, errors (NVIDIA's own words are
        in the container's log, `cluster.logs`)."""
        return self.nvidia_plugin.state(node)

    def plugin_log(self, node: str, previous: bool = False) -> str:
        """What `kubectl logs` shows of the plugin container on `node` (NVIDIA's own output,
        and the reason the kubelet stand-in wrote where it exited)."""
        pod, state = self.plugin_pod(node), self.plugin_state(node)
        if pod is None or state is None:
            return ""
        meta = pod["metadata"]
        text = self.logs.get(meta["namespace"], meta["name"], state.setup.main, previous)
        return text or ""

    def restart_plugin(self, node: str) -> None:
        """Delete the plugin pod on `node` (the DaemonSet makes a new one), then settle."""
        pod = self.plugin_pod(node)
        if pod is not None:
            self.store.delete("pods", pod["metadata"]["name"], pod["metadata"]["namespace"])
        self.settle()

    def keep_log(
        self, namespace: str, pod: str, container: str, text: str, previous: bool = False
    ) -> None:
        """The node keeps `text` as the container's log; return once the API server serves it
        (KWOK sees a new `Logs` object a moment after it is written)."""
        self.logs.set(namespace, pod, container, text, previous=previous)
        query = urllib.parse.urlencode({"container": container, "previous": str(previous).lower()})
        path = f"/api/v1/namespaces/{namespace}/pods/{pod}/log?{query}"
        start = time.monotonic()
        answer: object = None
        named_again = start
        while time.monotonic() < start + 60:
            try:
                answer = self.store.request("GET", path)
                if answer == text:
                    return
            except ApiError as exc:
                answer = exc
            if time.monotonic() - named_again > 10:
                self.logs.name_again(namespace, pod)
                named_again = time.monotonic()
            time.sleep(0.2)
        raise TimeoutError(
            f"the log of {namespace}/{pod} {container} was not served in 60 s; "
            f"the API server's last answer: {answer!r}"
        )
