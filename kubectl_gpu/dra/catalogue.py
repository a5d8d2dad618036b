"""The catalogue of DRA rules: every code the DRA checks can report, with its severity,
message and hint, and the one way to turn a code into a finding.

Messages quote upstream's wording where it has some: the API server's validation of
`resource.k8s.io` objects, and the NVIDIA DRA driver's config API (`resource.nvidia.com/
v1beta1`), whose errors appear only when `NodePrepareResources` fails on the node because
the driver's validating webhook is off by default. Must not decide when a rule applies.
Pure: imports only kubectl_gpu.findings.
"""

from __future__ import annotations

from kubectl_gpu import findings
from kubectl_gpu.findings import Finding, Path, Severity

_E, _W = Severity.ERROR, Severity.WARNING
_AT_PREPARE = "; the driver reports it only when the pod's NodePrepareResources fails: {upstream}"
_GATE = (
    "the DRA driver rejects this config unless its {gate} feature gate (alpha, off by default) "
    "is on; with it off, NodePrepareResources fails: {upstream}"
)

# code -> (severity, message, hint), formatted with the finding's values.
RULES: dict[str, tuple[Severity, str, str]] = {
    # --- the core shape, as the API server validates it -------------------------------------
    "dra.unknown-field": (
        _E,
        'unknown field "{field}"{where}',
        "{hint}",
    ),
    "dra.wrong-type": (
        _E,
        "{field} must be {expected}, not {actual}",
        "write {field} as {expected}",
    ),
    "dra.required": (
        _E,
        "{field}: Required value{detail}",
        "{hint}",
    ),
    "dra.request-name": (
        _E,
        "request name '{name}' is invalid: a lowercase RFC 1123 label must consist of lower "
        "case alphanumeric characters or '-', and must start and end with an alphanumeric "
        "character",
        "use a name such as gpu or mps-gpu (at most 63 characters)",
    ),
    "dra.duplicate-request": (
        _E,
        "Duplicate value: '{name}' (first used by entry {first})",
        "give every request (and every firstAvailable alternative) its own name",
    ),
    "dra.too-many": (
        _E,
        "Too many: {count}: must have at most {limit} items",
        "split the {what} across several claims",
    ),
    "dra.request-kind": (
        _E,
        "{upstream}",
        "{hint}",
    ),
    "dra.allocation-mode": (
        _E,
        'Unsupported value: "{mode}": supported values: "All", "ExactCount"',
        "use allocationMode: ExactCount (with count) or All (without count)",
    ),
    "dra.count": (
        _E,
        "count: Invalid value: {count}: {upstream}",
        "{hint}",
    ),
    "dra.device-class-name": (
        _E,
        "deviceClassName '{name}' is not a valid DeviceClass name (a lowercase RFC 1123 subdomain)",
        "use the name of a DeviceClass, e.g. gpu.nvidia.com or mig.nvidia.com",
    ),
    "dra.unknown-request": (
        _E,
        'requests: Invalid value: "{name}": must be the name of a request in the claim or the '
        "name of a request and a subrequest separated by '/'",
        "name one of the claim's requests: {known}",
    ),
    "dra.selector": (
        _E,
        "{upstream}",
        "write a CEL selector, e.g. cel: {{expression: \"device.attributes['gpu.nvidia.com']"
        ".productName == 'NVIDIA A100-SXM4-40GB'\"}}",
    ),
    # --- NVIDIA's opaque config (resource.nvidia.com/v1beta1) ---------------------------------
    "dra.config-decoding": (
        _E,
        "the DRA driver cannot decode these parameters" + _AT_PREPARE,
        "{hint}",
    ),
    "dra.config-unknown-field": (
        _E,
        'the DRA driver decodes configs strictly and rejects unknown field "{field}"' + _AT_PREPARE,
        "{hint}",
    ),
    "dra.unknown-strategy": (
        _E,
        "unknown GPU sharing strategy: {strategy}, supported GPU sharing strategies: "
        "TimeSlicing, MPS",
        "use strategy: TimeSlicing or strategy: MPS (the case matters)",
    ),
    "dra.unknown-interval": (
        _E,
        "unknown time-slice interval: {interval}, supported time-slice intervals: Default, "
        "Short, Medium, Long",
        "use one of Default, Short, Medium, Long",
    ),
    "dra.timeslicing-without-interval": (
        _E,
        "timeSlicingConfig has no interval: the DRA driver defaults the interval only when "
        "timeSlicingConfig is absent, and validating an empty one dereferences the missing "
        "interval",
        "set interval: Default, or remove timeSlicingConfig",
    ),
    "dra.strategy-config-mismatch": (
        _E,
        "cannot use {config} with the '{strategy}' strategy"
        + "; the driver reports it only when the pod's NodePrepareResources fails",
        "remove {config}, or set strategy: {other}",
    ),
    "dra.thread-percentage": (
        _E,
        "active thread percentage must not be {problem}",
        "use a whole number from 0 to 100",
    ),
    "dra.memory-limit": (
        _E,
        "{what} is {value}, below 1Mi" + _AT_PREPARE,
        "use a quantity of at least 1Mi, e.g. 10Gi",
    ),
    "dra.memory-quantity": (
        _E,
        "{what} '{value}' is not a Kubernetes quantity",
        "write a quantity such as 512Mi, 10Gi or 10G",
    ),
    "dra.memory-device-key": (
        _E,
        "defaultPerDevicePinnedMemoryLimit key '{key}' is neither a device index nor a UUID"
        + _AT_PREPARE,
        "key each limit by the allocated device's index (0, 1, …) or its UUID (GPU-…, MIG-…)",
    ),
    "dra.memory-device-index": (
        _E,
        "defaultPerDevicePinnedMemoryLimit key '{key}' is an index, but this config applies to "
        "{devices} device(s), indexed from 0" + _AT_PREPARE,
        "use an index below {devices}, or the device's UUID",
    ),
    "dra.config-device-kind": (
        _E,
        "cannot apply {config} to {device} devices ({why}){at_prepare}",
        "use {wanted} for {device} devices, or point the config at requests of the right class",
    ),
    "dra.feature-gate": (
        _W,
        _GATE,
        "install the driver with --set featureGates.{gate}=true (Helm value featureGates.{gate})",
    ),
}


def find(code: str, path: Path, *, at_key: bool = False, **values: object) -> Finding:
    """The finding for rule `code` at `path`, its message and hint filled with `values`."""
    return findings.from_rule(RULES, code, path, at_key=at_key, **values)
