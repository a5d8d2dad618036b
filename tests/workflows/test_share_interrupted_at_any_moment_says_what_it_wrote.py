"""A `share` interrupted at any request of its run (Ctrl-C, SIGTERM, the terminal closing),
before the request is sent or after the server applied a write whose answer never came back,
says exactly what the cluster holds (from the cluster, not from where the code was), exits
128 + the signal, and never sends a rollback after a run that wrote nothing: that would undo
the change before, which this run never made."""

from __future__ import annotations

import dataclasses
import signal
from typing import Any

import pytest

from kubectl_gpu import cluster, errors, keys
from kubectl_gpu.sharing import rollout
from kubectl_gpu.workflows.share import change
from kubectl_gpu.workflows.share.options import Options
from tests.kit.kube.client import KubeClient
from tests.kit.plane.helmplane import NAMESPACE

CONFIGMAP = ("configmaps", "nvdp-nvidia-device-plugin-configs", NAMESPACE)
NO_RESTART = Options(restart=False)
# what the run below sends (the agents' reports, read for GPU counts, among them); each is
# interrupted, and the run after the last ends
REQUESTS = 11


@dataclasses.dataclass
class Interrupting(cluster.Api):
    """The API as seen by a process that gets `signum` at request number `at`."""

    at: int = 0
    after: bool = False  # the server applies the write; its answer is lost
    signum: int = signal.SIGINT
    # one count for this Api and every copy the client makes of it (a list reads its pages
    # through a copy with a tighter answer bound): the process's requests, not one object's
    sent: list[str] = dataclasses.field(default_factory=list)

    def request(self, method: str, url: str, **kwargs: Any) -> Any:
        self.sent.append(f"{method} {url}")
        number = len(self.sent)
        if number == self.at and not self.after:
            self._stop()
        answer = super().request(method, url, **kwargs)
        if number == self.at and self.after:
            self._stop()
        return answer

    def _stop(self) -> None:
        raise KeyboardInterrupt if self.signum == signal.SIGINT else errors.Interrupted(self.signum)


def state(client: KubeClient) -> tuple[dict[str, str], str | None]:
    """The ConfigMap's keys and gpu-a's config label (the key gpu-a reads), on the server."""
    labels = client.get("nodes", "gpu-a")["metadata"]["labels"]
    return dict(client.get(*CONFIGMAP)["data"]), labels.get(keys.DEVICE_PLUGIN_CONFIG_LABEL)


@pytest.mark.parametrize("after", [False, True], ids=["before-sending", "answer-lost"])
@pytest.mark.parametrize("at", range(1, REQUESTS + 2))
def test_an_interruption_at_any_request_tells_the_truth(
    api: cluster.Api,  # noqa: F811
    static_client: KubeClient,
    at: int,
    after: bool,
) -> None:
    change.share(api, rollout.ShareRequest(replicas=2), NO_RESTART)  # the change before
    before = state(static_client)
    fields = {f.name: getattr(api, f.name) for f in dataclasses.fields(cluster.Api)}
    stopping = Interrupting(**fields, at=at, after=after, signum=signal.SIGTERM)
    request = rollout.ShareRequest(replicas=4, nodes=("gpu-a",))  # a key and a label

    try:
        change.share(stopping, request, NO_RESTART)
    except errors.GpuError as e:
        stopped: errors.GpuError | None = e
    else:
        stopped = None  # `at` is past the run's last request
    now = state(static_client)

    if stopped is None:
        assert now != before
        return
    assert at <= REQUESTS, f"the run now sends more than {REQUESTS} requests: raise REQUESTS"
    assert stopped.exit_code == 143
    if now == before:
        assert stopped.message.startswith("share was interrupted before it wrote anything")
        assert "do not run `kubectl gpu share rollback` for this" in stopped.hint
    else:
        assert "after writing ConfigMap nvidia-device-plugin/nvdp-nvidia-device-plugin" in (
            stopped.message
        )
        labelled = "node gpu-a's nvidia.com/device-plugin.config label" in stopped.message
        assert labelled == (now[1] is not None)
        assert "to undo, run `kubectl gpu share rollback`" in stopped.hint
        change.rollback(api, NO_RESTART)  # as the advice says: back to the change before
        data, label = state(static_client)
        assert (data["any"], label) == (before[0]["any"], before[1])  # added keys stay
