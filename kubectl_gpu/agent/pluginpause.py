"""Taking the device plugin off this node during a MIG change, and always bringing it back.

Owns the two ways (docs/upstream-facts.md M3.2, M6): under the GPU Operator and our own bundle, the
operator's convention, `nvidia.com/gpu.deploy.device-plugin=paused-for-mig-change` (the
operator's DaemonSet selects `"true"`, the bundle's excludes the paused value), with the
previous value kept in an annotation of ours so that a restarted agent restores exactly it;
under the Helm chart or a static manifest, whose DaemonSets we do not own, the plugin pod is
deleted before the change (it holds the GPUs open, so an A100/A30 reset would fail "in use";
its DaemonSet starts a new one at once, so this narrows the window but cannot close it) and
again after it, so that the new pod enumerates the new MIG devices. Every wait ends at a
deadline with a `GpuError`. Writes only this Node's labels/annotations and the plugin pod.
Must not decide when to pause (reconcile.py does).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kubectl_gpu import cluster, keys
from kubectl_gpu.errors import ClusterError, GpuError
from kubectl_gpu.sharing.deployment import Deployment
from kubectl_gpu.workflows.share import state as sharestate
from kubectl_gpu.workflows.waiting import Timing

log = logging.getLogger(__name__)
Json = dict[str, object]


class PluginPause:
    """The device plugin on one node, for one agent pass."""

    def __init__(
        self, api: cluster.Api, node: str, deployment: Deployment | None, timing: Timing
    ) -> None:
        self.api, self.node, self.deployment, self.timing = api, node, deployment, timing
        self.touched = False  # whether this pass paused or must restart the plugin
        self._old_uid: str | None = None

    @property
    def by_label(self) -> bool:
        return self.deployment is not None and self.deployment.kind in ("gpu-operator", "bundle")

    def paused(self, meta: dict[str, object]) -> bool:
        """Whether an earlier pass left the plugin paused (e.g. the agent crashed): our note of
        the label's value before, and the label still saying paused. The note alone (set by
        hand, or left when a pass ended between its two writes) pauses nothing: restoring its
        value could switch the plugin off (`false`) outside any change; the next pause
        overwrites it."""
        annotations = _dict(meta.get("annotations"))
        label = _dict(meta.get("labels")).get(keys.DEPLOY_DEVICE_PLUGIN_LABEL)
        return keys.MIG_PAUSED_PLUGIN_ANNOTATION in annotations and (
            label == keys.PAUSED_FOR_MIG_CHANGE
        )

    def pause(self, timeout: float) -> None:
        """Take the plugin off the node and wait for its pod to go."""
        self.touched = True
        if not self.by_label:
            self._restart()  # off the GPUs now; restored (and waited for) after the change
            return
        labels = _dict(self._meta().get("labels"))
        before = str(labels.get(keys.DEPLOY_DEVICE_PLUGIN_LABEL, "true"))
        if before == keys.PAUSED_FOR_MIG_CHANGE:
            before = "true"
        log.info("pausing the device plugin on %s", self.node)
        self._patch(
            {keys.DEPLOY_DEVICE_PLUGIN_LABEL: keys.PAUSED_FOR_MIG_CHANGE},
            {keys.MIG_PAUSED_PLUGIN_ANNOTATION: before},
        )
        self._wait(lambda: self._pod() is None, timeout, "the device plugin pod to leave")

    def restore(self, timeout: float) -> None:
        """Bring the plugin back (restart it where it was not paused) and wait until it runs."""
        meta = self._meta()
        if self.paused(meta):
            before = str(_dict(meta.get("annotations"))[keys.MIG_PAUSED_PLUGIN_ANNOTATION])
            log.info("restoring the device plugin on %s (%s)", self.node, before)
            self._patch({keys.DEPLOY_DEVICE_PLUGIN_LABEL: before or "true"}, {})
            self._patch({}, {keys.MIG_PAUSED_PLUGIN_ANNOTATION: None})
        elif self.touched and not self.by_label:
            self._restart()
        else:
            return
        self.touched = False
        if self.deployment is not None:
            self._wait(self._running, timeout, "the device plugin pod to run again")

    def restart(self, timeout: float) -> None:
        """Delete the plugin pod so that its DaemonSet starts one that reads the GPUs anew."""
        self._restart()
        if self.deployment is not None:
            self._wait(self._running, timeout, "the device plugin pod to run again")

    def _restart(self) -> None:
        pod = self._pod()
        if pod is None:
            return
        meta = _dict(pod.get("metadata"))
        log.info("restarting the device plugin on %s (pod %s)", self.node, meta.get("name"))
        try:
            self.api.delete(cluster.path("pods", str(meta["name"]), str(meta["namespace"])))
        except ClusterError as e:
            if e.status != 404:
                raise
        self._old_uid = str(meta.get("uid", ""))

    def _running(self) -> bool:
        pod = self._pod()
        if pod is None or str(_dict(pod.get("metadata")).get("uid", "")) == self._old_uid:
            return False
        return _dict(pod.get("status")).get("phase") == "Running"

    def _pod(self) -> dict[str, object] | None:
        if self.deployment is None:
            return None
        return sharestate.plugin_pods(self.api, self.deployment, self.node).get(self.node)

    def _wait(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = self.timing.deadline(timeout)
        while not done():
            if deadline.passed:
                raise GpuError(f"timed out after {timeout:g}s waiting for {what} on {self.node}")
            deadline.pause()

    def _meta(self) -> dict[str, object]:
        return _dict(self.api.get(cluster.path("nodes", self.node)).get("metadata"))

    def _patch(self, labels: dict[str, str], annotations: dict[str, str | None]) -> None:
        meta: dict[str, object] = {}
        if labels:
            meta["labels"] = labels
        if annotations:
            meta["annotations"] = annotations
        self.api.patch(cluster.path("nodes", self.node), {"metadata": meta})


def _dict(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}
