"""Which resources the stand-in serves: built-in types and those CRDs add.

Owns `ResourceType` (group, version, plural, kind, scope, short names, status subresource,
supported field labels) and `Registry`, which resolves URLs, kinds and kubectl-style names
(`po`, `daemonsets.apps`) to types. Must not store objects or speak HTTP.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

OBJECT_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
STATUS_VERBS = ("get", "patch", "update")
COMMON_FIELDS = ("metadata.name", "metadata.namespace")
_POD_FIELDS = (
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
)
_EVENT_FIELDS = tuple(
    f"involvedObject.{f}"
    for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
) + ("reason", "reportingComponent", "source", "type")


@dataclass(frozen=True, slots=True)
class ResourceType:
    """One served resource at one group/version, as discovery describes it."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    has_status: bool = False
    returns_deleted: bool = False  # DELETE answers with the object, not a Success Status
    generation: bool = False  # keeps metadata.generation (workloads, CRDs, every custom resource)
    field_labels: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    singular: str = ""
    list_kind: str = ""
    crd: str = ""  # name of the CRD that defines it; "" for built-ins

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def storage(self) -> tuple[str, str]:
        """Objects are kept per group and resource, whatever version they were written at."""
        return (self.group, self.plural)

    @property
    def list_kind_name(self) -> str:
        return self.list_kind or f"{self.kind}List"

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()

    def supports_field(self, label: str) -> bool:
        return label in COMMON_FIELDS or label in self.field_labels


def _t(group: str, plural: str, kind: str, namespaced: bool, **extra: Any) -> ResourceType:
    version = extra.pop("version", "v1")
    return ResourceType(group, version, plural, kind, namespaced, **extra)


_ALL = ("all",)
BUILTINS: tuple[ResourceType, ...] = (
    _t("", "namespaces", "Namespace", False, short_names=("ns",), has_status=True,
       returns_deleted=True, field_labels=("status.phase",)),
    _t("", "nodes", "Node", False, short_names=("no",), has_status=True,
       field_labels=("spec.unschedulable",)),
    _t("", "pods", "Pod", True, short_names=("po",), has_status=True, returns_deleted=True,
       field_labels=_POD_FIELDS, categories=_ALL),
    _t("", "configmaps", "ConfigMap", True, short_names=("cm",)),
    _t("", "secrets", "Secret", True, field_labels=("type",)),
    _t("", "serviceaccounts", "ServiceAccount", True, short_names=("sa",)),
    _t("", "events", "Event", True, short_names=("ev",), field_labels=_EVENT_FIELDS),
    _t("", "resourcequotas", "ResourceQuota", True, short_names=("quota",), has_status=True),
    _t("", "services", "Service", True, short_names=("svc",), has_status=True, categories=_ALL),
    _t("", "endpoints", "Endpoints", True, short_names=("ep",)),
    _t("apps", "daemonsets", "DaemonSet", True, short_names=("ds",),
       has_status=True, generation=True, categories=_ALL),
    _t("apps", "deployments", "Deployment", True, short_names=("deploy",),
       has_status=True, generation=True, categories=_ALL),
    _t("apps", "replicasets", "ReplicaSet", True, short_names=("rs",),
       has_status=True, generation=True, categories=_ALL),
    _t("apps", "statefulsets", "StatefulSet", True, short_names=("sts",),
       has_status=True, generation=True, categories=_ALL),
    _t("apps", "controllerrevisions", "ControllerRevision", True),
    _t("coordination.k8s.io", "leases", "Lease", True),
    _t("policy", "poddisruptionbudgets", "PodDisruptionBudget", True, short_names=("pdb",),
       has_status=True, generation=True),
    _t("node.k8s.io", "runtimeclasses", "RuntimeClass", False),
    _t("rbac.authorization.k8s.io", "roles", "Role", True),
    _t("rbac.authorization.k8s.io", "rolebindings", "RoleBinding", True),
    _t("rbac.authorization.k8s.io", "clusterroles", "ClusterRole", False),
    _t("rbac.authorization.k8s.io", "clusterrolebindings", "ClusterRoleBinding", False),
    _t("apiextensions.k8s.io", "customresourcedefinitions", "CustomResourceDefinition", False,
       short_names=("crd", "crds"), has_status=True, generation=True),
    _t("admissionregistration.k8s.io", "validatingadmissionpolicies",
       "ValidatingAdmissionPolicy", False, has_status=True, generation=True),
    _t("admissionregistration.k8s.io", "validatingadmissionpolicybindings",
       "ValidatingAdmissionPolicyBinding", False),
    _t("admissionregistration.k8s.io", "validatingwebhookconfigurations",
       "ValidatingWebhookConfiguration", False),
    _t("admissionregistration.k8s.io", "mutatingwebhookconfigurations",
       "MutatingWebhookConfiguration", False),
    _t("resource.k8s.io", "resourceclaims", "ResourceClaim", True, has_status=True),
    _t("resource.k8s.io", "resourceclaimtemplates", "ResourceClaimTemplate", True),
    _t("resource.k8s.io", "resourceslices", "ResourceSlice", False,
       field_labels=("spec.nodeName", "spec.driver")),
    _t("resource.k8s.io", "deviceclasses", "DeviceClass", False),
)  # fmt: skip


_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int]:
    """Sort key putting v2 before v1 before v1beta2 before v1alpha1 before anything else."""
    match = _VERSION.match(version)
    if not match:
        return (3, 0, 0)
    stage = {"": 0, "beta": 1, "alpha": 2}[match.group(2) or ""]
    return (stage, -int(match.group(1)), -int(match.group(3) or 0))


def types_from_crd(crd: dict[str, Any]) -> list[ResourceType]:
    """The resource types a CRD serves: one per served version."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    found: list[ResourceType] = []
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        selectable = version.get("selectableFields") or []
        found.append(
            ResourceType(
                group=spec["group"],
                version=version["name"],
                plural=names["plural"],
                kind=names["kind"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                has_status="status" in (version.get("subresources") or {}),
                generation=True,
                field_labels=tuple(f["jsonPath"].lstrip(".") for f in selectable),
                categories=tuple(names.get("categories") or ()),
                singular=names.get("singular", ""),
                list_kind=names.get("listKind", ""),
                crd=crd["metadata"]["name"],
            )
        )
    return found


@dataclass
class Registry:
    """All served types; safe to read from handler threads while a CRD changes them."""

    _types: dict[tuple[str, str, str], ResourceType] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def with_builtins(cls) -> Registry:
        registry = cls()
        registry.add(BUILTINS)
        return registry

    def add(self, types: Iterable[ResourceType]) -> None:
        with self._lock:
            for rtype in types:
                self._types[(rtype.group, rtype.version, rtype.plural)] = rtype

    def serve_versions(self, group: str, versions: Iterable[str]) -> None:
        """Serve a built-in group at exactly `versions` (an older or newer server), e.g.
        resource.k8s.io at v1beta1 only, as Kubernetes 1.32 does."""
        with self._lock:
            kinds = {t.plural: t for t in self._types.values() if t.group == group and not t.crd}
            for key in [k for k in self._types if k[0] == group and not self._types[k].crd]:
                del self._types[key]
            for version in versions:
                for rtype in kinds.values():
                    copy = replace(rtype, version=version)
                    self._types[(group, version, rtype.plural)] = copy

    def remove_crd(self, crd_name: str) -> list[ResourceType]:
        with self._lock:
            gone = [t for t in self._types.values() if t.crd == crd_name]
            for rtype in gone:
                del self._types[(rtype.group, rtype.version, rtype.plural)]
            return gone

    def all(self) -> list[ResourceType]:
        with self._lock:
            return list(self._types.values())

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        with self._lock:
            return self._types.get((group, version, plural))

    def groups(self) -> dict[str, list[str]]:
        """Group name → served versions, preferred first; the core group is "" and first."""
        versions: dict[str, set[str]] = {}
        for rtype in self.all():
            versions.setdefault(rtype.group, set()).add(rtype.version)
        order = sorted(versions, key=lambda g: (g != "", "." in g, g))
        return {g: sorted(versions[g], key=version_priority) for g in order}

    def for_kind(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        with self._lock:
            for rtype in self._types.values():
                if (rtype.group, rtype.version, rtype.kind) == (group, version, kind):
                    return rtype
        return None

    def lookup(self, name: str) -> ResourceType:
        """Resolve `pods`, `po`, `pod`, `daemonsets.apps` or `clusterpolicies.nvidia.com`."""
        base, _, group = name.partition(".")
        candidates = [t for t in self.all() if not group or t.group == group]
        for rtype in sorted(candidates, key=lambda t: version_priority(t.version)):
            if base in (rtype.plural, rtype.singular_name, *rtype.short_names):
                return rtype
        raise KeyError(f"no resource type named {name!r}")
