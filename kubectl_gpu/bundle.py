"""What `kubectl gpu install` puts in a cluster: the manifests, rendered from the options.

Owns the choice of manifest files per mode (`bundle`: namespace, report CRD, agent RBAC and
admission policy, NVIDIA's device plugin with its config, the agent; `operator`: the same
without the device plugin, the agent's plugin-restart Role placed in the operator's
namespace), the pinned device-plugin versions, checking the options before they reach a
template (a namespace or image is substituted into YAML text), and the order objects are
applied in (reversed for removal). Must not talk to a cluster (workflows/install/ does).
The manifests are data files shipped in the package (kubectl_gpu/manifests/*.yaml).
"""

from __future__ import annotations

import dataclasses
import json
import re
import string
from importlib import resources
from typing import Any, Literal

from kubectl_gpu import __version__, keys
from kubectl_gpu.errors import UsageError

Json = dict[str, Any]
Mode = Literal["bundle", "operator"]
MODES: tuple[Mode, ...] = ("bundle", "operator")
PullPolicy = Literal["Always", "IfNotPresent", "Never"]
PULL_POLICIES: tuple[PullPolicy, ...] = ("Always", "IfNotPresent", "Never")

# NVIDIA k8s-device-plugin releases this bundle is known to work with (docs/upstream-facts.md
# P6); the newest is the default.
DEVICE_PLUGIN_VERSIONS = ("v0.17.4", "v0.18.2", "v0.19.3", "v0.20.0")
DEVICE_PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin"
# The image .github/workflows/release.yaml builds and pushes on every version tag (a test
# checks that the two agree).
AGENT_IMAGE = "ghcr.io/kubectl-gpu/kubectl-gpu-agent"
OPERATOR_NAMESPACE = "gpu-operator"

AGENT = "kubectl-gpu-agent"
DEVICE_PLUGIN = "kubectl-gpu-device-plugin"
DEVICE_PLUGIN_CONFIGMAP = "kubectl-gpu-device-plugin-configs"
REPORT_CRD = "gpunodereports.crd.yaml"  # written and owned by the report's engineer
# Label keys on a Node the agent may write besides our prefix (the admission policy's list).
AGENT_NVIDIA_LABELS = (keys.DEVICE_PLUGIN_CONFIG_LABEL, keys.DEPLOY_DEVICE_PLUGIN_LABEL)
INSTALL_ANNOTATION = keys.INSTALL_ANNOTATION
VERSION_LABEL = keys.VERSION_LABEL
GPU_NODE_LABELS = keys.GPU_NODE_LABELS
# Any one of these places our pods (OR of nodeSelectorTerms): NFD's PCI vendor 10de, NFD's
# CPU vendor on Grace/Tegra, the GPU Operator's (or a hand-set) gpu.present, GFD's gpu.count.
GPU_NODE_TERMS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    *((key, "In", (value,)) for key, value in GPU_NODE_LABELS),
    (keys.GPU_COUNT_LABEL, "Exists", ()),
)
# Where our own device plugin is taken off a node for a MIG change or a GPU reset: the
# GPU Operator's label convention, honoured by the bundle's DaemonSet too.
_PLUGIN_OFF = (keys.DEPLOY_DEVICE_PLUGIN_LABEL, "NotIn", (keys.PAUSED_FOR_MIG_CHANGE, "false"))

_FILES: tuple[tuple[str, tuple[Mode, ...]], ...] = (
    ("bundle-10-namespace.yaml", MODES),
    (REPORT_CRD, MODES),
    ("bundle-30-agent-rbac.yaml", MODES),
    ("bundle-40-agent-admission.yaml", MODES),
    ("bundle-50-device-plugin.yaml", ("bundle",)),
    ("bundle-60-agent.yaml", MODES),
)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(
    r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
# registry/path:tag or @sha256:digest; no spaces, quotes or YAML punctuation.
_IMAGE = re.compile(r"^[a-z0-9][a-z0-9._/:-]{0,254}(@sha256:[a-f0-9]{64})?$")


@dataclasses.dataclass(frozen=True)
class Options:
    """How to install: `kubectl gpu install --mode … -n … --device-plugin-version …`."""

    mode: Mode = "bundle"
    namespace: str = keys.NAMESPACE
    device_plugin_version: str = DEVICE_PLUGIN_VERSIONS[-1]
    agent_image: str = f"{AGENT_IMAGE}:v{__version__}"
    operator_namespace: str = OPERATOR_NAMESPACE
    runtime_class: str = ""  # "" : the node's default runtime (nvidia there, or CDI-less)
    image_pull_policy: PullPolicy = "IfNotPresent"

    @property
    def plugin_namespace(self) -> str:
        """Where the device plugin's pods run (the agent deletes them there, nowhere else)."""
        return self.namespace if self.mode == "bundle" else self.operator_namespace

    @property
    def plugin_image(self) -> str:
        return f"{DEVICE_PLUGIN_IMAGE}:{self.device_plugin_version}"


def check(options: Options) -> Options:
    """`options`, or UsageError naming the bad one; templates only ever see checked values."""
    if options.mode not in MODES:
        raise UsageError(f"unknown mode {options.mode!r}", hint="use --mode bundle or operator")
    for flag, value in (("--namespace", options.namespace), ("--operator-namespace",
                        options.operator_namespace)):  # fmt: skip
        if not _DNS_LABEL.match(value):
            raise UsageError(
                f"{flag} {value!r} is not a valid namespace name",
                hint="use lower-case letters, digits and '-' (at most 63 characters)",
            )
    if options.device_plugin_version not in DEVICE_PLUGIN_VERSIONS:
        raise UsageError(
            f"device plugin version {options.device_plugin_version!r} is not one this bundle "
            "was checked with",
            hint="choose one of " + ", ".join(DEVICE_PLUGIN_VERSIONS),
        )
    if not _IMAGE.match(options.agent_image):
        raise UsageError(f"--image {options.agent_image!r} is not an image reference")
    if options.runtime_class and not _DNS_SUBDOMAIN.match(options.runtime_class):
        raise UsageError(f"--runtime-class {options.runtime_class!r} is not a RuntimeClass name")
    if options.image_pull_policy not in PULL_POLICIES:
        raise UsageError(
            f"--image-pull-policy {options.image_pull_policy!r} is not one of "
            + ", ".join(PULL_POLICIES)
        )
    return options


def render(options: Options) -> list[Json]:
    """Every object of the chosen mode, in the order they are applied."""
    import yaml

    check(options)
    values = {
        "NAMESPACE": options.namespace,
        "PLUGIN_NAMESPACE": options.plugin_namespace,
        "VERSION": __version__,
        "PLUGIN_IMAGE": options.plugin_image,
        "AGENT_IMAGE": options.agent_image,
    }
    objects: list[Json] = []
    for name, modes in _FILES:
        if options.mode in modes:
            text = _read(name)
            if name != REPORT_CRD:  # not a template: taken as its owner wrote it
                text = string.Template(text).substitute(values)
            objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    for daemonset in daemonsets(objects):
        _place(daemonset, options)
    _record(objects[0], options)
    return objects


def _place(daemonset: Json, options: Options) -> None:
    """What the YAML cannot say once: the node affinity, the runtime class, the pull policy."""
    pod = daemonset["spec"]["template"]["spec"]
    extra = [_PLUGIN_OFF] if daemonset["metadata"]["name"] == DEVICE_PLUGIN else []
    pod["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [_expression(*term) for term in (gpu, *extra)]}
            for gpu in GPU_NODE_TERMS
        ]}}}  # fmt: skip
    if options.runtime_class:
        pod["runtimeClassName"] = options.runtime_class
    for container in [*pod.get("initContainers", []), *pod["containers"]]:
        container["imagePullPolicy"] = options.image_pull_policy


def _expression(key: str, operator: str, values: tuple[str, ...]) -> Json:
    expression: Json = {"key": key, "operator": operator}
    if values:
        expression["values"] = list(values)
    return expression


def _record(namespace: Json, options: Options) -> None:
    record = {
        "version": __version__,
        "mode": options.mode,
        "devicePluginVersion": options.device_plugin_version,
        "agentImage": options.agent_image,
        "operatorNamespace": options.operator_namespace,
        "runtimeClass": options.runtime_class,
        "imagePullPolicy": options.image_pull_policy,
    }
    annotations = namespace["metadata"].setdefault("annotations", {})
    annotations[INSTALL_ANNOTATION] = json.dumps(record, sort_keys=True)


def recorded(namespace: Json | None) -> tuple[str, Options] | None:
    """(kubectl-gpu version, options) a namespace was installed with; None if not ours."""
    annotations = ((namespace or {}).get("metadata") or {}).get("annotations") or {}
    try:
        record = json.loads(annotations[INSTALL_ANNOTATION])
        options = Options(
            mode=record["mode"],
            namespace=str(((namespace or {}).get("metadata") or {}).get("name", "")),
            device_plugin_version=record["devicePluginVersion"],
            agent_image=record["agentImage"],
            operator_namespace=record["operatorNamespace"],
            runtime_class=str(record.get("runtimeClass", "")),
            image_pull_policy=record.get("imagePullPolicy", "IfNotPresent"),
        )
    except (KeyError, TypeError, ValueError):
        return None
    return str(record.get("version", "")), options


def is_gpu_node(node: Json) -> bool:
    """Whether our DaemonSets' node affinity places a pod on `node`."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    return any(_holds(labels, *term) for term in GPU_NODE_TERMS)


def _holds(labels: dict[str, str], key: str, operator: str, values: tuple[str, ...]) -> bool:
    if operator == "Exists":
        return key in labels
    return labels.get(key) in values


def has_gpus(node: Json) -> bool:
    """Whether `node` advertises NVIDIA GPUs (whichever device plugin put them there)."""
    capacity = (node.get("status") or {}).get("capacity") or {}
    return any(_is_gpu_resource(k) and str(v) not in ("0", "") for k, v in capacity.items())


def _is_gpu_resource(name: str) -> bool:
    return name == keys.GPU_RESOURCE or name.startswith(keys.MIG_RESOURCE_PREFIX)


def _read(name: str) -> str:
    return (resources.files("kubectl_gpu") / "manifests" / name).read_text(encoding="utf-8")


def identity(obj: Json) -> tuple[str, str, str]:
    """(kind, namespace, name) of a manifest object; namespace "" when cluster-scoped."""
    meta = obj.get("metadata") or {}
    return str(obj.get("kind", "")), str(meta.get("namespace", "")), str(meta.get("name", ""))


def daemonsets(objects: list[Json]) -> list[Json]:
    return [o for o in objects if o.get("kind") == "DaemonSet"]
