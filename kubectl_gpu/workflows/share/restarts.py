"""Restarting the device plugin on the nodes a sharing change reaches, a few at a time.

Owns the rolling restart: for each batch of at most `max_unavailable` nodes, delete the plugin
pod found by the DaemonSet's selector, `spec.nodeName` and the plugin container (GFD and MPS
pods share the labels of NVIDIA's Helm chart, deployments/helm/nvidia-device-plugin in
github.com/NVIDIA/k8s-device-plugin; they are restarted beside it, unwaited),
then wait for the DaemonSet's new pod to be Running and Ready, and to stay so for `STEADY_S`
with no container restart (a DaemonSet's minReadySeconds); each batch says on stderr which it
is of how many, how many nodes are done and what it waits for. A new pod that crash-loops, or
one not Ready by the timeout, ends the rollout: no later batch starts.

Batches overlap as Kubernetes' own DaemonSet rollout does: at most `max_unavailable` nodes
are without a Ready plugin at any time (the DaemonSet's maxUnavailable), and a node starts the
moment another's new pod is Ready, while the steady check of those before goes on beside it;
a batch's line is said when its first node starts. A config is proven per (config key, GPU
product): the first node of each pair (by GFD's `nvidia.com/gpu.product`) is moved to the front
of the order and starts with no other node of its pair, which starts only once that proof
passed the steady check; nodes of a proven pair fill the free places at once. A config the
plugin rejects is caught on one node per product (a model without the MIG strategy or MPS it
asks for, on that model's first node), not on a whole batch; a later failure (one node's own)
stops the rollout with at most `max_unavailable` more nodes restarted beside it. Deletes
run side by side (at most `PARALLEL` at a time; the cluster port sends a request turned away
with 429 again after its Retry-After). The pods are looked at through one LIST and one watch
of the plugin's namespace (`pluginpods`; the caller starts it, and reads from it which pod
each node had): no request per look, none per node, and no pause longer than the next thing
due; a look goes through the nodes still restarting, not all those started. Must not decide
which nodes to restart (the plan does).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubectl_gpu import cluster, errors
from kubectl_gpu.sharing import rollout
from kubectl_gpu.workflows.progress import Batches
from kubectl_gpu.workflows.share.pluginpods import PluginPods
from kubectl_gpu.workflows.waiting import Deadline, Timing

log = logging.getLogger(__name__)
Json = dict[str, Any]
WAITED_FOR = "a new device plugin pod to be Running and Ready"
STAYING = "the new device plugin pods to stay Ready"
# The plugin has no readiness probe, so kubelet calls it Ready the moment it starts, and one
# that rejects its new config exits a second or so later: a single Ready look proves nothing.
STEADY_S = 3.0
PARALLEL = 16  # deletes in flight at once within a batch: bounded, so a large batch
# does not open hundreds of connections to the API server at the same moment
HEARTBEAT_S = 1.0  # the longest a watching rollout waits without looking at its progress
GATHER_S = 0.1  # a look after a watch event waits this long for the events that come with it:
# a look costs time in proportion to the pods known (5,000 nodes: 10,000), not one per event


@dataclasses.dataclass(frozen=True)
class Restart:
    """How one node's plugin restart went."""

    node: str
    pod: str  # the new plugin pod ("" when none came)
    outcome: str  # restarted | failed | skipped
    seconds: float = 0.0
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome == "restarted"


@dataclasses.dataclass
class _Node:
    """One restarting node: the pod it had, its batch, and what was seen of its new pod."""

    name: str
    old: str  # uid of the plugin pod deleted ("" when it had none)
    batch: int
    deadline: Deadline  # from its batch's start to the rollout's end
    seen: rollout.PluginPod | None = None
    read: Json | None = None  # the pod object `seen` was read from (parsed again only if new)
    ready: tuple[float, int] | None = None  # when first seen Ready, and its restarts then
    result: Restart | None = None


Proof = tuple[str, str]  # (config key read afterwards, GPU product): proven on one node


def roll(
    api: cluster.Api,
    pods: PluginPods,
    nodes: Mapping[str, Proof],
    batch: tuple[int, float],
    timing: Timing,
) -> Iterator[Restart]:
    """Restart the plugin on `nodes` (in order; each with the (config key, GPU product) it
    proves or relies on: the first node of each pair proves it); `batch` is (max unavailable,
    seconds for all batches).

    Yields each node's restart as it ends, so that a caller interrupted mid-way (Ctrl-C, an
    API failure) can say which nodes were restarted. `pods` is started and closed by the
    caller, who reads from it which pods were there before.
    """
    size = max(1, batch[0])
    proofs = {pair: name for name, pair in reversed(list(nodes.items()))}  # first of each
    first = [n for n in nodes if proofs[nodes[n]] == n]
    order = first + [n for n in nodes if proofs[nodes[n]] != n]
    run = _Rollout(api, pods, timing, order, (size, batch[1]))

    def startable(name: str) -> bool:  # its pair's proof, or a node of a proven pair
        proof = run.nodes.get(proofs[nodes[name]])
        return proofs[nodes[name]] == name or (proof is not None and _ok(proof))

    at = 0  # the next node to start
    while at < len(order) and not run.failed and not run.overall.passed:
        if not startable(order[at]):  # its pair's proof must pass the steady check first
            run.until_proven(run.nodes[proofs[nodes[order[at]]]])
        elif run.unavailable() < size:  # a free place: start as many as fit
            free = size - run.unavailable()
            ready = list(itertools.takewhile(startable, order[at : at + free]))
            run.start(ready, at)
            at += len(ready)
        else:  # woken as soon as one of those restarting is Ready again
            run.until(run.has_room, WAITED_FOR)
        yield from run.take()
    run.until(run.all_final, STAYING)
    yield from run.take()
    failed = ", ".join(n.name for n in run.nodes.values() if n.result and not _ok(n))
    why = f"stopped after {failed} failed" if failed else f"--timeout ({batch[1]:g}s) passed"
    for name in order[at:]:  # never started: the rollout stopped first
        yield Restart(name, "", "skipped", message=f"not restarted: {why}")


class _Rollout:
    """The nodes restarted so far and what each new pod did."""

    def __init__(
        self, api: cluster.Api, pods: PluginPods, timing: Timing, order: Sequence[str],
        batch: tuple[int, float],
    ) -> None:  # fmt: skip
        self.api, self.pods, self.timing, self.order = api, pods, timing, order
        progress = Batches(len(order), batch[0], timing)
        overall = timing.deadline(batch[1])
        self.progress, self.overall = progress, overall
        self.container = pods.deployment.container
        self.nodes: dict[str, _Node] = {}
        # the nodes started whose restart has not ended: what a look goes through, so that its
        # cost follows `--max-unavailable`, not how many nodes have already been restarted
        self._open: dict[str, _Node] = {}
        self._failures = 0
        self._told: list[Restart] = []
        self._ended = 0  # batches said to have ended, in order

    @property
    def failed(self) -> bool:
        return self._failures > 0

    def all_final(self) -> bool:
        return not self._open

    def unavailable(self) -> int:
        """Nodes restarting whose new plugin pod is not Ready (yet)."""
        return sum(n.ready is None for n in self._open.values())

    def all_ready(self) -> bool:
        """Every restarting node's new pod is Ready (or one failed)."""
        return self.failed or self.unavailable() == 0

    def has_room(self) -> bool:
        """Another node may start (or none will: one failed)."""
        return self.failed or self.unavailable() < self.progress.size

    def take(self) -> list[Restart]:
        """The restarts that ended since the last call."""
        told, self._told = self._told, []
        return told

    def start(self, group: Sequence[str], at: int) -> None:
        """Delete the plugin (and its companions) on `group`, the nodes from place `at` of the
        order on; a batch's line is said when its first node starts."""
        size = self.progress.size
        for place in range(at, at + len(group)):
            if place % size == 0:
                self.progress.begin(
                    "restarting the device plugin", self.order[place : place + size]
                )
        left = max(0.0, self.overall.end - self.timing.clock())
        deadline = self.timing.deadline(left)  # --timeout bounds the whole rollout
        current = self.pods.plugins(group)
        doomed = list(self.pods.companions(group))
        for place, node in enumerate(group, at):
            number = place // size + 1
            pod = current.get(node)
            if pod is None:
                # The DaemonSet may be replacing it (the GPU Operator re-renders it after a
                # ClusterPolicy change): any plugin pod that comes up now has the new config.
                log.info("no device plugin pod on %s right now; waiting for one", node)
                self._open[node] = self.nodes[node] = _Node(node, "", number, deadline)
                continue
            meta = pod.get("metadata") or {}
            uid = str(meta.get("uid", ""))
            self._open[node] = self.nodes[node] = _Node(node, uid, number, deadline)
            log.info("restarting the device plugin on %s (pod %s)", node, meta.get("name"))
            doomed.append(pod)
        _delete_all(self.api, doomed)

    def until_proven(self, proof: _Node) -> None:
        """Wait for `proof`'s new pod to be Ready, or for its steady check to end."""
        if proof.result is None and proof.ready is None:
            self.until(lambda: self.failed or proof.ready is not None, WAITED_FOR)
        else:
            self.until(lambda: self.failed or proof.result is not None, STAYING)

    def until(self, done: Callable[[], bool], what: str) -> None:
        """Look (and wait between looks) until `done()` or the rollout's deadline."""
        interval = min(self.timing.first_poll, self.timing.poll)
        while True:
            self._look()
            if done():
                return
            if self.overall.passed:
                self._expire()
                return
            waiting = [n.name for n in self._open.values() if what == STAYING or n.ready is None]
            self.progress.waiting(what, waiting)
            left = max(0.0, self.overall.end - self.timing.clock())
            if self.timing.live:  # woken by the watch; else the next steady check due
                self.pods.pause(min(self._due(), HEARTBEAT_S, left))
                self.timing.sleep(min(GATHER_S, max(0.0, self.overall.end - self.timing.clock())))
            else:
                self.pods.pause(min(interval, left))
                interval = min(interval * 2, self.timing.poll)

    def _due(self) -> float:
        now = self.timing.clock()
        due = [max(0.0, n.ready[0] + STEADY_S - now) for n in self._open.values() if n.ready]
        return min(due, default=HEARTBEAT_S)

    def _look(self) -> None:
        open_ = dict(self._open)  # settling a node takes it out
        if not open_:
            return
        found = self.pods.plugins(open_)
        for name, node in open_.items():
            pod = found.get(name)
            if pod is None or str((pod.get("metadata") or {}).get("uid", "")) == node.old:
                continue
            if pod is not node.read:
                node.seen, node.read = rollout.PluginPod.from_dict(pod, self.container), pod
            self._settle(node, _verdict(node, self.timing.clock()))
        self._end_batches()

    def _settle(self, node: _Node, result: Restart | None) -> None:
        if result is not None:
            node.result = result
            self._told.append(result)
            del self._open[node.name]
            self._failures += not result.ok

    def _expire(self) -> None:
        for node in list(self._open.values()):
            seen = node.seen
            if seen is not None and node.ready is not None:  # Ready until the end: back
                self._settle(node, Restart(node.name, seen.name, "restarted",
                                           node.deadline.elapsed()))  # fmt: skip
                continue
            status = f" (last seen {seen.name}: {seen.status})" if seen else ""
            status = status or " (no new pod appeared)"
            span = node.deadline.end - node.deadline.start
            message = f"the plugin did not become Ready within {span:g}s{status}"
            name = seen.name if seen else ""
            self._settle(node, Restart(node.name, name, "failed", node.deadline.elapsed(), message))
        self._end_batches()

    def _end_batches(self) -> None:
        """Say each batch whose nodes all ended, in order."""
        size = self.progress.size
        while self._ended < self.progress.number:
            number = self._ended + 1
            mine = [self.nodes.get(n) for n in self.order[(number - 1) * size : number * size]]
            if any(n is None or n.result is None for n in mine):
                return
            self.progress.end(sum(_ok(n) for n in mine if n is not None), number)
            self._ended = number


def _ok(node: _Node) -> bool:
    return node.result is not None and node.result.ok


def _verdict(node: _Node, now: float) -> Restart | None:
    """restarted once Ready for `STEADY_S` (or until the deadline) with no restart between;
    failed when crash-looping; None while it is too early to say."""
    state, deadline = node.seen, node.deadline
    assert state is not None
    if state.running:
        if node.ready is None:
            node.ready = (now, state.restarts)
        since, restarts = node.ready
        if state.restarts != restarts:  # it crashed and came back between two looks
            node.ready = (now, state.restarts)
            return None
        if now - since < STEADY_S and not deadline.passed:
            return None
        log.info("the device plugin on %s is back (%s)", node.name, state.name)
        return Restart(node.name, state.name, "restarted", deadline.elapsed())
    node.ready = None
    if state.crash_looping:
        detail = f": {state.message}" if state.message else ""
        message = f"plugin pod {state.name} is {state.status} ({state.restarts} restarts){detail}"
        return Restart(node.name, state.name, "failed", deadline.elapsed(), message)
    return None


def _delete_all(api: cluster.Api, pods: Sequence[Json]) -> None:
    """Delete `pods` side by side; the first failure is raised once all have been tried."""
    if len(pods) <= 1:
        for pod in pods:
            _delete(api, pod)
        return
    with ThreadPoolExecutor(max_workers=min(PARALLEL, len(pods))) as pool:
        outcomes = list(pool.map(lambda pod: _attempt(api, pod), pods))
    failure = next((e for e in outcomes if e is not None), None)
    if failure is not None:
        raise failure


def _attempt(api: cluster.Api, pod: Json) -> errors.ClusterError | None:
    try:
        _delete(api, pod)
    except errors.ClusterError as e:
        return e
    return None


def _delete(api: cluster.Api, pod: Json) -> None:
    meta = pod["metadata"]
    assert isinstance(meta, dict)
    try:
        api.delete(cluster.path("pods", str(meta["name"]), str(meta["namespace"])))
    except errors.ClusterError as e:
        if e.status != 404:  # already gone: the DaemonSet replaces it all the same
            raise
