"""Every label, annotation and ConfigMap key string kubectl-gpu reads or writes.

Defined once here; no key literals elsewhere. Our own keys use the
`kubectl-gpu.io/` prefix; NVIDIA's are used where we drive NVIDIA components.
"""

from __future__ import annotations

PREFIX = "kubectl-gpu.io/"
# the apiVersion of every document we emit (-o json|yaml) and of our GPUNodeReport CRD
API_VERSION = "kubectl-gpu.io/v1"

# NVIDIA device plugin / GPU Feature Discovery (docs/upstream-facts.md P1, P3)
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_REPLICAS_LABEL = "nvidia.com/gpu.replicas"
GPU_SHARING_STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"
GPU_COMPUTE_MAJOR_LABEL = "nvidia.com/gpu.compute.major"
GPU_COMPUTE_MINOR_LABEL = "nvidia.com/gpu.compute.minor"

# NVIDIA MIG manager (docs/upstream-facts.md M3)
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"

# Ours
MIG_DESIRED_LABEL = PREFIX + "mig.config"
MIG_STATE_LABEL = PREFIX + "mig.state"
MIG_REASON_ANNOTATION = PREFIX + "mig.reason"

# Sharing rollouts (kubectl gpu share): what was there before, for `share rollback`.
PREVIOUS_CONFIG_ANNOTATION = PREFIX + "previous-config"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "kubectl-gpu"

# GPU Feature Discovery / GPU Operator node labels read by `kubectl gpu share`
# (docs/upstream-facts.md P2.3). A resource's physical count is labelled `<resource>.count`.
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
COUNT_LABEL_SUFFIX = ".count"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"  # GFD, on every node where it found GPUs
GPU_RESOURCE = "nvidia.com/gpu"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
MPS_CAPABLE_LABEL = "nvidia.com/mps.capable"
MIG_CAPABLE_LABEL = "nvidia.com/mig.capable"
GFD_TIMESTAMP_LABEL = "nvidia.com/gfd.timestamp"  # GFD rewrites it every relabel (60 s)
NVIDIA_PREFIX = "nvidia.com/"

# Labels that identify the device plugin's DaemonSet (docs/upstream-facts.md P6).
APP_LABEL = "app"  # GPU Operator: app=nvidia-device-plugin-daemonset
APP_NAME_LABEL = "app.kubernetes.io/name"  # NVIDIA Helm chart: nvidia-device-plugin
APP_INSTANCE_LABEL = "app.kubernetes.io/instance"  # NVIDIA Helm chart: the release
STATIC_NAME_LABEL = "name"  # static manifest: name=nvidia-device-plugin-ds

# ConfigMap keys: the key config-manager's `named` fallback looks for (docs/upstream-facts.md P3.2),
# and the prefix of the per-node keys `kubectl gpu share --node` creates.
DEFAULT_CONFIG_KEY = "default"
PER_NODE_KEY_PREFIX = "kubectl-gpu-"

# MIG apply (kubectl gpu mig apply and the node agent). The agent records on its own Node the
# request it took up (`<config>@<content hash>`), how far it got, the request it last applied,
# each GPU's layout and its GPUs (for the CLI's offline check); `mig.force` holds the request
# key that may proceed although a GPU is in use.
MIG_REQUEST_ANNOTATION = PREFIX + "mig.request"
MIG_PHASE_ANNOTATION = PREFIX + "mig.phase"
MIG_APPLIED_ANNOTATION = PREFIX + "mig.applied"
MIG_LAYOUT_ANNOTATION = PREFIX + "mig.layout"
MIG_GPUS_ANNOTATION = PREFIX + "mig.gpus"
MIG_FORCE_ANNOTATION = PREFIX + "mig.force"
# The device plugin's deploy label value before the agent paused it (GPU Operator layout).
MIG_PAUSED_PLUGIN_ANNOTATION = PREFIX + "mig.paused-plugin"
# Since when (RFC 3339, UTC) a MIG change has been pending on the node, ours or the operator's
# MIG manager's: the agent records it, `mig status` and `doctor` tell a stuck node by it.
MIG_PENDING_SINCE_ANNOTATION = PREFIX + "mig.pending-since"
# A `--drain` in progress on a node (JSON: change, step, whether we cordoned it, pods, since),
# so that an interrupted run can be resumed (run it again) or undone (`mig recover`).
DRAIN_ANNOTATION = PREFIX + "drain"
MIG_CONFIGMAP = "kubectl-gpu-mig-config"  # one key per config name, in our namespace
NAMESPACE = "kubectl-gpu"

# GPU Operator: its operands' node labels and the MIG manager's pause value
# (docs/upstream-facts.md M3.2).
DEPLOY_DEVICE_PLUGIN_LABEL = "nvidia.com/gpu.deploy.device-plugin"
DEPLOY_MIG_MANAGER_LABEL = "nvidia.com/gpu.deploy.mig-manager"
DEPLOY_LABEL_PREFIX = "nvidia.com/gpu.deploy."  # one per operand; mig-manager pauses some
PAUSED_FOR_MIG_CHANGE = "paused-for-mig-change"
MIG_PARTED_CONFIG_KEY = "config.yaml"  # the key the operator's mig-manager reads
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"

# kubectl gpu install: on our Namespace, the options it was installed with (for `status`
# and a later `install`), and the version label of every object of the bundle.
INSTALL_ANNOTATION = PREFIX + "install"
VERSION_LABEL = "app.kubernetes.io/version"
# Labels that mark a GPU node (NFD's PCI vendor, NFD's CPU vendor on Grace, GFD/operator):
# the same terms as the bundle DaemonSets' node affinity.
GPU_NODE_LABELS = (
    ("feature.node.kubernetes.io/pci-10de.present", "true"),
    ("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"),
    (GPU_PRESENT_LABEL, "true"),
)
