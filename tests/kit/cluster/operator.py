"""A GPU Operator stand-in: ClusterPolicy in, device-plugin and GFD DaemonSets out
(docs/upstream-facts.md M3.4).

Owns rendering `nvidia-device-plugin-daemonset` (pods `app=nvidia-device-plugin-daemonset`,
container `nvidia-device-plugin`, init `toolkit-validation`, nodeSelector
`nvidia.com/gpu.deploy.device-plugin: "true"`) and `gpu-feature-discovery` from the
ClusterPolicy, with `handleDevicePluginConfig`'s transform when `spec.devicePlugin.config.name`
is set (config-manager init and sidecar, `DEFAULT_CONFIG=<default>`,
`FALLBACK_STRATEGIES=empty`, the ConfigMap volume named after the ConfigMap,
docs/upstream-facts.md P3.4),
`MIG_STRATEGY` from `spec.mig.strategy` and `spec.devicePlugin.env` on top; with `mig_manager`
(the cluster runs the MIG manager stand-in), `nvidia-mig-manager` (pods `app=nvidia-mig-manager`
on `gpu.deploy.mig-manager=true` nodes) unless `spec.migManager.enabled` is false, its pods'
work being migmanager.py's; re-rendering whenever
the ClusterPolicy (or a rendered DaemonSet) changes; the node-labelling controller's
`nvidia.com/gpu.deploy.*` labels on GPU nodes; and the ClusterPolicy's `status.state`. Must not
simulate the operands themselves.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable, Iterable
from typing import Any

from tests.kit.kube import ApiError
from tests.kit.kube import manifests as m
from tests.kit.plane.loop import Change
from tests.kit.plane.store import ApiStore

Obj = dict[str, Any]
PLUGIN_DS, GFD_DS = "nvidia-device-plugin-daemonset", "gpu-feature-discovery"
MIG_MANAGER_DS = "nvidia-mig-manager"
DEPLOY_LABELS = (
    "driver",
    "gpu-feature-discovery",
    "container-toolkit",
    "device-plugin",
    "dcgm",
    "dcgm-exporter",
    "node-status-exporter",
    "operator-validator",
)
ENTRYPOINT = "nvidia-device-plugin-entrypoint"
HASH_ANNOTATION = "nvidia.com/last-applied-hash"
GPU_NODE_LABELS = ("nvidia.com/gpu.present", "feature.node.kubernetes.io/pci-10de.present")


def _image(section: Obj, default: str) -> str:
    if section.get("repository") and section.get("image") and section.get("version"):
        return f"{section['repository']}/{section['image']}:{section['version']}"
    return default


def _validation_init() -> Obj:
    return {
        "name": "toolkit-validation",
        "image": m.VALIDATOR_IMAGE,
        "command": ["sh", "-c"],
        "args": [
            "until [ -f /run/nvidia/validations/toolkit-ready ]; do echo waiting for nvidia "
            "container stack to be setup; sleep 5; done"
        ],
        "securityContext": {"privileged": True},
        "volumeMounts": [
            {
                "name": "run-nvidia-validations",
                "mountPath": "/run/nvidia/validations",
                "mountPropagation": "HostToContainer",
            }
        ],
    }


def _plugin_container(section: Obj) -> Obj:
    return {
        "name": "nvidia-device-plugin",
        "image": _image(section, m.PLUGIN_IMAGE),
        "command": ["/bin/sh", "-c"],
        "args": ["/bin/entrypoint.sh"],
        "securityContext": {"privileged": True},
        "env": m.env(
            {
                "PASS_DEVICE_SPECS": "true",
                "FAIL_ON_INIT_ERROR": "true",
                "DEVICE_LIST_STRATEGY": "envvar",
                "DEVICE_ID_STRATEGY": "uuid",
                "NVIDIA_VISIBLE_DEVICES": "all",
                "NVIDIA_DRIVER_CAPABILITIES": "all",
                "MPS_ROOT": "/run/nvidia/mps",
            }
        ),
        "volumeMounts": [
            {
                "name": ENTRYPOINT,
                "mountPath": "/bin/entrypoint.sh",
                "subPath": "entrypoint.sh",
                "readOnly": True,
            },
            {"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"},
            {"name": "run-nvidia-validations", "mountPath": "/run/nvidia/validations"},
            {"name": "mps-root", "mountPath": "/mps"},
        ],
    }


def render_plugin(policy: Obj, namespace: str) -> Obj:
    spec = policy.get("spec") or {}
    section = spec.get("devicePlugin") or {}
    main = _plugin_container(section)
    pod_spec = _pod_spec(spec, "device-plugin", "nvidia-device-plugin", main)
    pod_spec["volumes"] = [
        {"name": ENTRYPOINT, "configMap": {"name": ENTRYPOINT, "defaultMode": 448}},
        m.host_path("device-plugin", "/var/lib/kubelet/device-plugins"),
        m.host_path("run-nvidia-validations", "/run/nvidia/validations", "DirectoryOrCreate"),
        m.host_path("mps-root", "/run/nvidia/mps", "DirectoryOrCreate"),
    ]
    _configure(pod_spec, section, "nvidia-device-plugin", spec)
    return _daemonset(
        PLUGIN_DS,
        namespace,
        policy,
        pod_spec,
        {"nvidia.cdi.k8s.io/container.nvidia-device-plugin": "management.nvidia.com/gpu=all"},
    )


def render_gfd(policy: Obj, namespace: str) -> Obj:
    spec = policy.get("spec") or {}
    section = spec.get("gfd") or {}
    main = {
        "name": "gpu-feature-discovery",
        "image": _image(section, m.PLUGIN_IMAGE),
        "command": ["/bin/bash", "-c"],
        "args": ["exec gpu-feature-discovery"],
        "env": [dict(m.NODE_NAME_ENV), *m.env({"GFD_SLEEP_INTERVAL": "60s"})],
        "securityContext": {"privileged": True},
        "volumeMounts": [
            {"name": "output-dir", "mountPath": "/etc/kubernetes/node-feature-discovery/features.d"}
        ],
    }
    pod_spec = _pod_spec(spec, "gpu-feature-discovery", "gpu-feature-discovery", main)
    pod_spec["volumes"] = [
        m.host_path("output-dir", "/etc/kubernetes/node-feature-discovery/features.d"),
        # what its toolkit-validation init container mounts (the API server checks it)
        m.host_path("run-nvidia-validations", "/run/nvidia/validations", "DirectoryOrCreate"),
    ]
    _configure(pod_spec, spec.get("devicePlugin") or {}, "gpu-feature-discovery", spec)
    m.set_env(pod_spec["containers"][0], {k: v for k, v in _env(section).items()})
    return _daemonset(GFD_DS, namespace, policy, pod_spec, None)


def render_mig_manager(policy: Obj, namespace: str) -> Obj:
    """`nvidia-mig-manager` on nodes labelled `nvidia.com/gpu.deploy.mig-manager=true`; what
    its pod does is migmanager.py's."""
    main = {
        "name": "nvidia-mig-manager",
        "image": m.PLUGIN_IMAGE.replace("k8s-device-plugin", "k8s-mig-manager"),
        "env": [dict(m.NODE_NAME_ENV), *m.env({"CONFIG_FILE": "/mig-parted-config/config.yaml"})],
        "securityContext": {"privileged": True},
    }
    pod_spec = _pod_spec(policy.get("spec") or {}, "mig-manager", "nvidia-mig-manager", main)
    # what its toolkit-validation init container mounts: a real API server refuses the
    # DaemonSet without it ("volumeMounts[0].name: Not found")
    pod_spec["volumes"] = [
        m.host_path("run-nvidia-validations", "/run/nvidia/validations", "DirectoryOrCreate")
    ]
    return _daemonset(MIG_MANAGER_DS, namespace, policy, pod_spec, None)


def _pod_spec(spec: Obj, deploy: str, service_account: str, main: Obj) -> Obj:
    daemonsets = spec.get("daemonsets") or {}
    return {
        "nodeSelector": {f"nvidia.com/gpu.deploy.{deploy}": "true"},
        "tolerations": list(daemonsets.get("tolerations") or [dict(m.GPU_TOLERATION)]),
        "priorityClassName": daemonsets.get("priorityClassName") or "system-node-critical",
        "serviceAccountName": service_account,
        "initContainers": [_validation_init()],
        "containers": [main],
    }


def _env(section: Obj) -> dict[str, str]:
    return {str(e["name"]): str(e.get("value", "")) for e in section.get("env") or []}


def _configure(pod_spec: Obj, plugin_section: Obj, process: str, spec: Obj) -> None:
    main = pod_spec["containers"][0]
    m.set_env(main, {"MIG_STRATEGY": str((spec.get("mig") or {}).get("strategy") or "single")})
    config = plugin_section.get("config") or {}
    if config.get("name"):
        name = str(config["name"])
        wiring = m.ConfigWiring(
            name, str(config.get("default") or ""), "empty", process, volume=name
        )
        m.with_config_manager(pod_spec, main["name"], wiring)
    if process == "nvidia-device-plugin":
        m.set_env(main, _env(plugin_section))  # the user's env goes on last and wins


def _daemonset(name: str, namespace: str, policy: Obj, pod_spec: Obj, notes: Obj | None) -> Obj:
    spec = policy.get("spec") or {}
    rolling = (spec.get("daemonsets") or {}).get("rollingUpdate") or {}
    ds = m.daemonset(
        name,
        namespace,
        selector={"app": name},
        labels={"app": name},
        pod_spec=pod_spec,
        annotations=notes,
        max_unavailable=_int_or_string(rolling.get("maxUnavailable", "1")),
    )
    meta = policy["metadata"]
    ds["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    return ds


def _int_or_string(value: Any) -> Any:
    """The ClusterPolicy keeps maxUnavailable as a string; the operator parses it as an
    IntOrString (intstr.Parse), so "1" becomes 1: the API server rejects a non-percent string."""
    text = str(value)
    return int(text) if text.isdigit() else text


class GpuOperator:
    """Reconciles ClusterPolicies into DaemonSets in the operator's namespace."""

    name = "gpu-operator"

    def __init__(
        self, store: ApiStore, namespace: str = "gpu-operator", mig_manager: bool = False
    ) -> None:
        self.store = store
        self.namespace = namespace
        self.mig_manager = mig_manager  # render its DaemonSet (the cluster runs its stand-in)
        self._rbac_made = False

    def keys_for(self, change: Change) -> Iterable[Hashable]:
        if change.resource == "clusterpolicies":
            return [("policy",)]
        if change.resource == "daemonsets" and change.namespace == self.namespace:
            return [("policy",)] if change.name in (PLUGIN_DS, GFD_DS, MIG_MANAGER_DS) else []
        if change.resource == "nodes" and change.type != "DELETED":
            return [("node", change.name)]
        return []

    def reconcile(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        try:
            policies = self.store.list("clusterpolicies.nvidia.com")
        except KeyError:
            return  # the CRD is not installed: no operator runs, nothing is labelled
        if not policies:
            return  # the operator acts (and labels nodes) only for a ClusterPolicy
        if key[0] == "node":
            self._label(str(key[1]))
            return
        for node in self.store.list("nodes"):  # a new ClusterPolicy: label what is there
            self._label(str(node["metadata"]["name"]))
        self._apply(policies[0])  # the operator honours one ClusterPolicy

    def _apply(self, policy: Obj) -> None:
        spec = policy.get("spec") or {}
        wanted = {
            PLUGIN_DS: render_plugin(policy, self.namespace),
            GFD_DS: render_gfd(policy, self.namespace),
            MIG_MANAGER_DS: render_mig_manager(policy, self.namespace),
        }
        enabled = {
            PLUGIN_DS: (spec.get("devicePlugin") or {}).get("enabled", True),
            GFD_DS: (spec.get("gfd") or {}).get("enabled", True),
            MIG_MANAGER_DS: self.mig_manager
            and (spec.get("migManager") or {}).get("enabled", True),
        }
        self._entrypoint()
        for ds in wanted.values():
            self._service_account(ds["spec"]["template"]["spec"]["serviceAccountName"])
        self._gfd_rbac()
        for name, ds in wanted.items():
            self._ensure(name, ds if enabled[name] else None)
        status = {"state": "ready", "namespace": self.namespace}
        if {k: (policy.get("status") or {}).get(k) for k in status} != status:
            self.store.patch(
                "clusterpolicies.nvidia.com",
                policy["metadata"]["name"],
                {"status": status},
                status=True,
            )

    def _entrypoint(self) -> None:
        """The ConfigMap holding the plugin's entrypoint.sh (state-device-plugin 0400)."""
        try:
            self.store.get("configmaps", ENTRYPOINT, self.namespace)
        except ApiError:
            script = (
                "#!/bin/sh\n"
                "while [ ! -f /run/nvidia/validations/driver-ready ]; do sleep 5; done\n"
                "set -a; . /run/nvidia/validations/driver-ready\n"
                "exec nvidia-device-plugin\n"
            )
            labels = {"app": PLUGIN_DS}
            self.store.create(
                m.configmap(ENTRYPOINT, self.namespace, {"entrypoint.sh": script}, labels)
            )

    def _service_account(self, name: str) -> None:
        """Each operand's ServiceAccount, which the operator creates with its state (a pod
        naming a missing one is refused by the API server's ServiceAccount admission)."""
        try:
            self.store.get("serviceaccounts", name, self.namespace)
        except ApiError:
            self.store.create(m.service_account(name, self.namespace))

    def _gfd_rbac(self) -> None:
        """GFD's Role (nodefeatures, in the operator's namespace) and ClusterRole (nodes, pods),
        as the operator's gpu-feature-discovery state creates them."""
        if self._rbac_made:
            return
        name, account = "nvidia-gpu-feature-discovery", "gpu-feature-discovery"
        objects = [
            *m.role_for(name, account, self.namespace, [m.GFD_NODEFEATURE_RULE], cluster=False),
            *m.role_for(name, account, self.namespace, m.GFD_CLUSTER_RULES, cluster=True),
        ]
        for obj in objects:
            try:
                self.store.create(obj)
            except ApiError as exc:
                if exc.code != 409:  # made by an earlier operator on this plane
                    raise
        self._rbac_made = True

    def _ensure(self, name: str, wanted: Obj | None) -> None:
        try:
            current = self.store.get("daemonsets", name, self.namespace)
        except ApiError:
            current = None
        if wanted is None:
            if current is not None:
                self.store.delete("daemonsets", name, self.namespace)
            return
        digest = hashlib.sha256(json.dumps(wanted, sort_keys=True).encode()).hexdigest()[:16]
        wanted["metadata"]["annotations"] = {HASH_ANNOTATION: digest}
        if current is None:
            self.store.create(wanted)
            return
        # Like the operator, compare a hash of what it rendered, so that a user's
        # `rollout restart` annotation survives until the ClusterPolicy changes.
        if (current["metadata"].get("annotations") or {}).get(HASH_ANNOTATION) == digest:
            return
        current["metadata"].setdefault("annotations", {})[HASH_ANNOTATION] = digest
        current["spec"] = wanted["spec"]
        current["metadata"]["labels"] = wanted["metadata"]["labels"]
        current["metadata"]["ownerReferences"] = wanted["metadata"]["ownerReferences"]
        self.store.update(current)

    def _label(self, node: str) -> None:
        """The operator's node labelling: GPU nodes get every `gpu.deploy.*` it manages."""
        try:
            labels = self.store.get("nodes", node)["metadata"].get("labels") or {}
        except ApiError:
            return
        if not any(labels.get(k) == "true" for k in GPU_NODE_LABELS):
            return
        deploy = list(DEPLOY_LABELS)
        if labels.get("nvidia.com/mig.capable") == "true":
            deploy.append("mig-manager")
        missing = {
            f"nvidia.com/gpu.deploy.{d}": "true"
            for d in deploy
            if f"nvidia.com/gpu.deploy.{d}" not in labels
        }
        if "nvidia.com/gpu.present" not in labels:
            missing["nvidia.com/gpu.present"] = "true"
        if missing:
            self.store.patch("nodes", node, {"metadata": {"labels": missing}})
