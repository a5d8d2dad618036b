"""The catalogue of device-plugin sharing rules: every code `check()` can report, with its
severity, message and hint, and the one way to turn a code into a finding.

Messages quote upstream's own error strings where it has one; `{name}` fields are filled
from the finding's values. Must not decide when a rule applies (the section modules do).
Pure: imports only kubectl_gpu.findings.
"""

from __future__ import annotations

from kubectl_gpu import findings
from kubectl_gpu.findings import Finding, Path, Severity

_E, _W = Severity.ERROR, Severity.WARNING
_IGNORED = 'the device plugin (up to v0.20) validates {field}, then {instead}; it logs "{log}"'
_MPS_CAP = (
    "invalid MPS configuration: invalid device maximum allowed replicas exceeded: "
    "{replicas} > {cap}"
)

# Every rule check() applies: code -> (severity, message, hint), formatted with the finding's
# values. Messages quote upstream's own error strings where it has one.
RULES: dict[str, tuple[Severity, str, str]] = {
    "sharing.both-strategies": (
        _E,
        "both sharing.timeSlicing and sharing.mps are set: the device plugin raises no error, "
        "uses MPS and silently ignores timeSlicing",
        "keep only the strategy you want: timeSlicing or mps",
    ),
    "sharing.no-resources": (
        _E,
        "no resources specified: sharing.{block} needs at least one resource, otherwise the "
        "device plugin fails to start",
        "add resources: [{{name: nvidia.com/gpu, replicas: 4}}], or remove sharing.{block} to "
        "turn sharing off",
    ),
    "sharing.replicas-too-low": (
        _E,
        "number of replicas must be >= 2",
        "use 2 or more replicas per GPU; to turn sharing off, remove the sharing block "
        "(replicas: 1 is rejected)",
    ),
    "sharing.resource-name-prefix": (
        _E,
        "resource name '{name}' has a prefix other than nvidia.com/: the device plugin reads it "
        "as '{full}' and fails with \"{upstream}\"",
        "use a name under nvidia.com/, e.g. nvidia.com/gpu (a bare 'gpu' means the same)",
    ),
    "sharing.resource-name-too-long": (
        _E,
        "{upstream}",
        "shorten the name: with its nvidia.com/ prefix it may have at most 63 characters",
    ),
    "sharing.resource-name-format": (
        _E,
        "{upstream}",
        "use lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, "
        "e.g. nvidia.com/gpu",
    ),
    "sharing.duplicate-resource": (
        _E,
        "{name} is listed twice (first as entry {first}): the device plugin raises no error and "
        "the replica count it uses is undefined",
        "keep a single entry per resource",
    ),
    "sharing.resource-not-advertised": (
        _W,
        "no device is advertised as {name} under migStrategy {mig}, so this entry shares nothing: "
        "the device plugin silently skips it (sharing.{block} can share {shareable} here)",
        "{fix}",
    ),
    "sharing.bad-devices": (
        _E,
        '{problem}: the device plugin fails with "{upstream}"',
        "use devices: all (the device plugin ignores any other value anyway), or list GPU "
        "indices (0), MIG indices (0:1) or UUIDs (GPU-…, MIG-…)",
    ),
    "sharing.devices-ignored": (
        _W,
        _IGNORED,
        "remove devices; to share only some nodes' GPUs, give those nodes another config through "
        "the nvidia.com/device-plugin.config label",
    ),
    "sharing.rename-ignored": (
        _W,
        _IGNORED,
        "remove rename; renameByDefault: true advertises <name>.shared instead",
    ),
    "sharing.many-replicas": (
        _W,
        "{replicas} time-slicing replicas per GPU: time-slicing gives no memory or fault "
        "isolation, so any one of these pods can use up the GPU's memory or crash the others",
        "use at most 16 replicas, or MPS (memory limited per client) or MIG (isolated "
        "instances) when pods must not disturb each other",
    ),
    "sharing.mps-too-many-replicas": (
        _E,
        'MPS allows at most 48 replicas per GPU: the MPS control daemon crash-loops with "'
        + _MPS_CAP
        + '" while the device plugin keeps advertising the replicas',
        "use at most 48 replicas (16 on GPUs below compute capability 7.5)",
    ),
    "sharing.mps-replicas-old-gpus": (
        _W,
        "{replicas} MPS replicas work only on GPUs of compute capability 7.5 or later: on older "
        'GPUs (V100, P100, ...) the MPS control daemon fails with "' + _MPS_CAP + '"',
        "use at most 16 replicas on nodes with older GPUs (node labels "
        "nvidia.com/gpu.compute.major/minor)",
    ),
    "sharing.mps-root-missing": (
        _W,
        "MPS needs a root directory and flags.mpsRoot is not set: the device plugin fails with "
        '"using MPS requires --mps-root to be specified" unless MPS_ROOT is set in its '
        "environment, as the NVIDIA Helm chart and the GPU Operator do (/run/nvidia/mps)",
        "add flags.mpsRoot: /run/nvidia/mps when the plugin runs without the Helm chart or the "
        "GPU Operator",
    ),
    "sharing.mps-with-mixed-mig": (
        _E,
        "using --mig-strategy=mixed is not supported with MPS",
        "use migStrategy: none with MPS (it shares full GPUs only), or time-slicing to share "
        "MIG devices",
    ),
    "sharing.mps-fail-requests-version": (
        _W,
        "failRequestsGreaterThanOne: false is honoured under MPS only from device plugin v0.20; "
        "earlier versions force it to true and reject pods that request more than one replica",
        "run device plugin v0.20 or later on these nodes, or request one replica per container",
    ),
    "sharing.allocation-policy-version": (
        _W,
        "sharedDevicesAllocationPolicy exists only from device plugin v0.20; earlier versions "
        "silently ignore it",
        "make sure these nodes run device plugin v0.20 or later",
    ),
    "sharing.device-list-comma": (
        _E,
        "deviceListStrategy '{value}' is one string, not a list: the device plugin fails with "
        '"invalid --device-list-strategy option: invalid strategy: {value}"',
        "write a YAML list: deviceListStrategy: [{names}]",
    ),
    "sharing.sleep-interval-nanoseconds": (
        _W,
        "GFD reads a bare number as nanoseconds: sleepInterval: {value} is {value}ns, not "
        "{value}s, so GFD relabels the node almost continuously",
        "write a duration with a unit, e.g. sleepInterval: {value}s",
    ),
    "sharing.sleep-interval-version": (
        _W,
        "sleepInterval: infinite is understood only from GFD v0.19; earlier versions fail with "
        '"time: invalid duration \\"infinite\\""',
        "make sure these nodes run GFD v0.19 or later, or use a long interval such as 24h",
    ),
    "sharing.imex-channel-ids": (
        _E,
        "invalid IMEX channel IDs: invalid IMEX config: channelIDs must be [] or [0]; found {ids}",
        "use channelIDs: [0], or [] for no IMEX channel",
    ),
    "sharing.resources-ignored": (
        _W,
        _IGNORED,
        "remove the resources block; to advertise shared GPUs as <name>.shared use "
        "renameByDefault: true in the sharing block",
    ),
}


def find(code: str, path: Path, *, at_key: bool = False, **values: object) -> Finding:
    """The finding for rule `code` at `path`, its message and hint filled with `values`."""
    return findings.from_rule(RULES, code, path, at_key=at_key, **values)
