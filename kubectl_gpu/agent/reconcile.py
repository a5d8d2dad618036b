"""One reconcile pass of the node agent: bring this node's GPUs to the MIG config asked for.

Owns the flow (the issue, docs/upstream-facts.md M2.5, M6): read the desired label and the config
from our ConfigMap; read the GPUs through NVML; let `mig.apply.decide` say where to start;
then validate on the device, refuse a GPU in use (NVML processes or PodResources allocations)
unless forced, take the device plugin off the node, change MIG mode, GPU and compute
instances as `mig.plan` says, verify, always bring the plugin back, and wait until the node's
allocatable shows the layout's resources. Every wait has a deadline; any failure is reported
as `failed` (or `reboot-required`) with the reason, and the plugin is restored in `finally`.
Writes only this Node's labels/annotations (on change) and its plugin pod. Must not contain
rules: what to change is `plan`'s, where to resume is `apply`'s.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from kubectl_gpu import cluster, errors, keys, kubelet, nvml
from kubectl_gpu.agent import nodestate
from kubectl_gpu.agent.pluginpause import PluginPause
from kubectl_gpu.mig import apply, nodes, plan, profiles, verdicts
from kubectl_gpu.mig.apply import Phase, Start, State
from kubectl_gpu.mig.selection import ALL
from kubectl_gpu.mig.spec import MigDeviceSpec
from kubectl_gpu.mig.state import MigState
from kubectl_gpu.workflows.waiting import Timing

log = logging.getLogger(__name__)
_REASON_MAX = 2048  # an annotation the CLI prints in one line
_DESTRUCTIVE = (
    plan.SetMigMode,
    plan.ResetGpu,
    plan.DestroyComputeInstance,
    plan.DestroyGpuInstance,
)


@dataclasses.dataclass(frozen=True)
class Options:
    """What the agent was started with."""

    node: str
    namespace: str = keys.NAMESPACE
    kubelet_socket: Path | None = None  # PodResources; None: processes only
    timeout: float = 300.0  # every wait
    reset: nvml.Reset | None = None  # None: a mode change waiting for a reset needs a reboot


@dataclasses.dataclass
class _Pass:
    api: cluster.Api
    options: Options
    timing: Timing
    node: nodestate.NodeState
    request: str = ""
    specs: tuple[MigDeviceSpec, ...] = ()


def reconcile(api: cluster.Api, options: Options, timing: Timing | None = None) -> Start:
    """One pass; returns where it started (tests and logs).

    Fenced: an exception that is not a GpuError (a bug, or input no check foresaw) ends the
    pass as `failed` with the reason on the Node, the plugin brought back, and is raised
    again as `InternalError` for the loop to log; the next pass starts afresh.
    """
    run = _Pass(api, options, timing or Timing(), nodestate.NodeState.read(api, options.node))
    run.node.note_pending(dt.datetime.now(dt.timezone.utc))
    deployment = nodestate.deployment(api)
    pause = PluginPause(api, options.node, deployment, run.timing)
    try:
        return _pass(run, pause)
    except errors.GpuError:
        raise
    except Exception as e:  # noqa: BLE001 - the pass fence
        bug = f"{type(e).__name__}: {e}"
        reason = f"internal error: {bug} (a bug: please report it at {errors.REPORT_BUGS})"
        log.exception("node %s: %s", options.node, reason)
        _fenced(run, pause, errors.printable(reason)[:_REASON_MAX])
        raise errors.InternalError(reason) from e


def _pass(run: _Pass, pause: PluginPause) -> Start:
    options = run.options
    refused = _request(run)  # read and validated before the GPUs are opened
    with nvml.session(options.reset) as device:
        state = device.read_state()
        run.node.report_gpus(state)
        refused = refused or _selects_absent(run, state)
        start = Start.NOTHING if refused else _decide(run, state, pause)
        said = log.debug if start is Start.NOTHING else log.info  # at rest: quiet every pass
        said("node %s: %s (desired %s)", options.node, start.value, run.request or "none")
        if start is Start.RESTORE:
            pause.restore(options.timeout)
        elif start is Start.ABANDON:
            _abandon(run, pause, state)
        elif start in (Start.CONFIGURE, Start.VERIFY):
            _change(run, device, state, pause, start)
    return start


def _fenced(run: _Pass, pause: PluginPause, reason: str) -> None:
    """Record the failed pass: its request (so that it is not retried in a loop) and reason."""
    name = run.node.desired
    request = run.request or (nodestate.request_of(run.node, name) if name else None)
    try:
        run.node.report(State.FAILED, request=request, phase=None, reason=reason)
        pause.restore(run.options.timeout)
    except Exception as e:  # noqa: BLE001 - reporting is best effort; the loop logs the cause
        log.warning("node %s: could not record the failure: %s", run.options.node, e)


def _abandon(run: _Pass, pause: PluginPause, state: MigState) -> None:
    record = run.node.record()
    phase = record.phase.value if record.phase else "pending"
    reason = (
        f"the desired config label was removed while {record.request or 'a change'} was "
        f"being applied ({phase}); the GPUs were left as they are: "
        + "; ".join(f"GPU {i}: {text}" for i, text in apply.layouts(state.gpus).items())
        + ". Set the label again to finish the change"
    )
    _finish(run, pause, State.FAILED, reason)


def _request(run: _Pass) -> bool:
    """Read the desired config into `run`; True when it is refused (reported as failed)."""
    name = run.node.desired
    if not name:
        _forget_hand_set_state(run.node)
        return False
    refusal = nodestate.operator_refusal(run.api, run.node)
    if refusal:
        _fail_once(run, nodestate.request_of(run.node, name), refusal)
        return True
    try:
        run.request, run.specs = nodestate.read_config(run.api, run.options.namespace, name)
    except nodestate.ConfigRejected as e:
        _fail_once(run, e.request, e.message)
        return True
    except errors.GpuError as e:
        _fail_once(run, f"{name}@?", e.message)
        return True
    return False


def _selects_absent(run: _Pass, state: MigState) -> bool:
    """True (reported as failed) when the config lists a GPU index this node does not have:
    mig-parted would skip it silently and report success for a change never made; the CLI's
    check calls the node's GPUs `not-covered`."""
    have = {g.index for g in state.gpus}
    listed = {i for spec in run.specs if spec.devices != ALL for i in spec.devices}
    absent = sorted(listed - have)
    if not run.request or not absent:
        return False
    gpus = ", ".join(map(str, absent))
    _fail_once(
        run,
        run.request,
        f"config {run.node.desired} selects GPU {gpus}, which this node does not have (its GPUs: "
        f"{', '.join(map(str, sorted(have))) or 'none'}); kubectl gpu mig validate --node "
        f"{run.options.node} shows which GPUs each spec covers",
    )
    return True


def _forget_hand_set_state(node: nodestate.NodeState) -> None:
    """A state label with no request recorded was not written by an agent (each writes the
    request with its first state): remove it, so that no one reads a change that never ran."""
    record = node.record()
    if not record.request and keys.MIG_STATE_LABEL in node.labels:
        log.info("node %s: removing a %s label no request stands behind", node.name,
                 keys.MIG_STATE_LABEL)  # fmt: skip
        node.write(
            {keys.MIG_STATE_LABEL: None},
            {keys.MIG_REASON_ANNOTATION: None, keys.MIG_PHASE_ANNOTATION: None},
        )


def _decide(run: _Pass, state: MigState, pause: PluginPause) -> Start:
    matches = bool(run.request) and _matches(run, state)
    seen = apply.Observed(
        run.request,
        matches,
        apply.mode_waiting(state.gpus),
        pause.paused(run.node.meta),
        forced=bool(run.request) and run.node.forced == run.request,
    )
    return apply.decide(run.node.record(), seen)


def _matches(run: _Pass, state: MigState) -> bool:
    try:
        return not plan.make(state, run.specs)
    except errors.GpuError:
        return False


def _fail_once(run: _Pass, request: str, reason: str) -> None:
    record = run.node.record()
    if record.request != request or record.state is not State.FAILED:
        reason = errors.printable(reason)[:_REASON_MAX]
        run.node.report(State.FAILED, request=request, phase=None, reason=reason)


def _change(
    run: _Pass, device: nvml.Session, state: MigState, pause: PluginPause, start: Start
) -> None:
    try:
        if start is Start.CONFIGURE:
            state = _configure(run, device, state, pause)
        run.node.report(State.PENDING, phase=Phase.RESTORING)
        pause.restore(run.options.timeout)
        run.node.report(State.PENDING, phase=Phase.VERIFYING)
        _await_allocatable(run, state, pause)
    except nvml.NvmlUnavailableError:
        raise  # the container lost the driver: a new agent resumes from the recorded phase
    except nvml.RebootRequiredError as e:
        _finish(run, pause, State.REBOOT_REQUIRED, f"{e.message}; reboot the node")
        return
    except errors.GpuError as e:
        _finish(run, pause, State.FAILED, e.message)
        return
    run.node.report_success(run.request, apply.layouts(state.gpus))


def _finish(run: _Pass, pause: PluginPause, state: State, reason: str) -> None:
    log.warning("node %s: %s: %s", run.options.node, state.value, reason)
    try:
        pause.restore(run.options.timeout)
    except errors.GpuError as e:
        reason = f"{reason}; the device plugin did not come back: {e.message}"
    run.node.report(state, phase=None, reason=reason)


def _configure(run: _Pass, device: nvml.Session, state: MigState, pause: PluginPause) -> MigState:
    run.node.report(State.PENDING, request=run.request, phase=Phase.VALIDATING, reason="")
    steps = _planned(run, state)
    _check_on_device(device, steps)
    _refuse_in_use(run, device, state, steps)
    run.node.report(State.PENDING, phase=Phase.PAUSING)
    pause.pause(run.options.timeout)
    run.node.report(State.PENDING, phase=Phase.CONFIGURING)
    for undo in [s for s in steps if isinstance(s, _DESTRUCTIVE)]:
        device.execute(undo)
    if apply.mode_waiting(device.read_state().gpus):
        raise nvml.RebootRequiredError("a MIG mode change waits for a GPU reset")
    for create in [s for s in steps if not isinstance(s, _DESTRUCTIVE)]:
        if isinstance(create, plan.CreateGpuInstance):
            device.check(create)
        device.execute(create)
    return _verify(run, device)


def _planned(run: _Pass, state: MigState) -> tuple[plan.Step, ...]:
    try:
        return plan.make(state, run.specs, strategy=run.node.strategy)
    except errors.GpuError as e:
        raise errors.GpuError(f"config {run.node.desired} does not fit: {e.message}") from e


def _check_on_device(device: nvml.Session, steps: Sequence[plan.Step]) -> None:
    """NVML's own profiles and placements for every instance the plan creates, before touching
    anything: MIG mode off included, where the driver answers then."""
    for step in steps:
        if isinstance(step, plan.CreateGpuInstance):
            device.check(step)


def _refuse_in_use(
    run: _Pass, device: nvml.Session, state: MigState, steps: Sequence[plan.Step]
) -> None:
    if run.node.forced == run.request:
        run.node.write({}, {keys.MIG_FORCE_ANNOTATION: None})  # used up: one forced attempt
        return
    affected = sorted({s.gpu for s in steps if isinstance(s, _DESTRUCTIVE)})
    users = _pod_users(run, device, state, affected)
    for index in affected:
        found = [f"process {pid}" for pid in device.running_processes(index)]
        found += users.get(index, [])
        if found:
            raise errors.GpuError(
                f"GPU {index} is in use ({', '.join(found)}); stop the workload or re-apply "
                "with --force"
            )


def _pod_users(
    run: _Pass, device: nvml.Session, state: MigState, gpus: Sequence[int]
) -> dict[int, list[str]]:
    socket = run.options.kubelet_socket
    if socket is None or not gpus:
        return {}
    owner: dict[str, int] = {}
    for index in gpus:
        owner[state.gpu(index).uuid] = index
        if state.gpu(index).mode_current:
            owner.update({d.uuid: index for d in device.mig_devices(index)})
    users: dict[int, list[str]] = {}
    for allocation in kubelet.list_pod_resources(socket, run.options.timeout):
        for device_id in allocation.device_ids:
            user = owner.get(device_id.split("::")[0])
            if user is not None:
                users.setdefault(user, []).append(f"pod {allocation.namespace}/{allocation.pod}")
    return users


def _verify(run: _Pass, device: nvml.Session) -> MigState:
    state = device.read_state()
    left = plan.make(state, run.specs)
    if left:
        raise errors.DeviceError(f"the GPUs do not show the layout after applying: {left[0]}")
    for gpu in state.gpus:
        if gpu.mode_current:
            wanted = sum(len(g.compute_instances) for g in gpu.gpu_instances)
            found = device.mig_devices(gpu.index)
            if len(found) != wanted:
                raise errors.DeviceError(
                    f"GPU {gpu.index}: NVML enumerates {len(found)} MIG devices, not {wanted}"
                )
    return state


def _await_allocatable(run: _Pass, state: MigState, pause: PluginPause) -> None:
    target = nodes.state_target(state, run.options.node)
    specs = (*run.specs, *_as_found(run.specs, target, state))
    resources = verdicts.check("desired", specs, target, run.node.strategy).resources
    deadline = run.timing.deadline(run.options.timeout)
    restarted = pause.touched
    while True:
        missing = apply.expected_resources(
            resources, nodestate.allocatable(run.api, run.node), _replicas(run)
        )
        if not missing:
            return
        if not restarted:  # the plugin still shows an older layout: restart it once
            pause.restart(run.options.timeout)
            restarted = True
        if deadline.passed:
            raise errors.GpuError(_allocatable_message(missing, run.options.timeout))
        deadline.pause()


def _as_found(
    specs: Sequence[MigDeviceSpec], target: nodes.Target, state: MigState
) -> list[MigDeviceSpec]:
    """A spec for each GPU the config does not select, describing it as it is: the node's
    allocatable keeps showing what such a GPU offers, and the change must not wait for it to
    go (`devices: [0]` on a node whose GPU 1 is partitioned, or whole)."""
    found = []
    for selection in nodes.select(specs, target.gpus):
        if selection.covered:
            continue
        gpu = state.gpu(selection.gpu.index)
        names = [ci.profile for gi in gpu.gpu_instances for ci in gi.compute_instances]
        try:
            counts = Counter(profiles.parse(name) for name in names)
        except profiles.ProfileError as e:
            raise errors.GpuError(f"GPU {gpu.index} (not in the config) shows {e}") from e
        enabled = gpu.mig_capable and gpu.mode_current
        found.append(MigDeviceSpec((gpu.index,), (), enabled, tuple(counts.items())))
    return found


def _replicas(run: _Pass) -> dict[str, int]:
    """Replicas per device from what kubelet can allocate; none known without its socket."""
    socket = run.options.kubelet_socket
    if socket is None:
        return {}
    try:
        registered = kubelet.allocatable_resources(socket, run.options.timeout)
    except errors.KubeletError as e:
        log.warning("cannot read the node's replicas from kubelet: %s", e.message)
        return {}
    return apply.replicas_per_device({r.resource: r.device_ids for r in registered.resources})


def _allocatable_message(missing: dict[str, tuple[int, int]], timeout: float) -> str:
    shown = ", ".join(f"{name} {have} (want {want})" for name, (want, have) in missing.items())
    return f"timed out after {timeout:g}s waiting for the node's allocatable: {shown}"
