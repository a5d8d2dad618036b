"""Who talks to the control plane besides its admin: ServiceAccount tokens the API server issues
(TokenRequest, optionally bound to a Pod or Node so they carry the node-name claim a
kubelet-mounted token has), users allowed everything but what a test denies, and the
kubeconfigs that name them (also for a test's own plain-HTTP socket).

Owns `Users` (for one plane: `token`, `user_denied`, `kubeconfig_for`), `write_kubeconfig` and
`plain_kubeconfig`. Must not print a token (it goes into a kubeconfig of mode 0600) nor grant
more than a test asks (RBAC is the server's: it only allows).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from pathlib import Path
from typing import Any

import yaml

from tests.kit.plane.rawapi import RawApi

# What RBAC rules may grant on resources (`user_denied`).
VERBS = frozenset(
    "get list watch create update patch delete deletecollection "
    "bind escalate impersonate use approve sign attest".split()
)
PLACEHOLDER_TOKEN = "placeholder-token"  # `plain_kubeconfig`'s: must never be printed


@dataclasses.dataclass(frozen=True)
class Users:
    """The users of one plane, made through its admin's `api`."""

    api: RawApi

    def token(
        self,
        service_account: str,
        namespace: str,
        *,
        bound_kind: str | None = None,
        bound_name: str | None = None,
        seconds: int = 3600,
    ) -> str:
        """A token the API server issues for a ServiceAccount (TokenRequest), optionally bound
        to a Pod or Node so it carries the node-name claim a kubelet-mounted token has."""
        spec: dict[str, Any] = {"expirationSeconds": seconds, "audiences": []}
        if bound_kind:
            obj = self.api.get(
                f"/api/v1/namespaces/{namespace}/pods/{bound_name}"
                if bound_kind == "Pod"
                else f"/api/v1/nodes/{bound_name}"
            )
            spec["boundObjectRef"] = {
                "kind": bound_kind,
                "apiVersion": "v1",
                "name": bound_name,
                "uid": obj["metadata"]["uid"],
            }
        answer = self.api.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
        )
        return str(answer["status"]["token"])

    def user_denied(self, name: str, path: Path, denied: Collection[tuple[str, str, str]]) -> Path:
        """A kubeconfig for ServiceAccount `name` in `default`, allowed everything but each
        denied (verb, resource, group): RBAC only allows, so a denied verb is granted on every
        resource discovery lists now (subresources too) but the denied ones. Made again on each
        call (resources served since are then included)."""
        denied_verbs = {verb for verb, _, _ in denied}
        # every verb not denied anywhere, on everything (also what is not served: a user
        # without rights is told 403, not 404, about a CRD that does not exist)
        rules = [{"apiGroups": ["*"], "resources": ["*"], "verbs": sorted(VERBS - denied_verbs)}]
        served = self._served()
        for verb in sorted(denied_verbs):  # a denied verb: on each served resource but those
            by_group: dict[str, list[str]] = {}
            for group, resource, verbs in served:
                if verb in verbs and (verb, resource, group) not in denied:
                    by_group.setdefault(group, []).append(resource)
            rules += [
                {"apiGroups": [group], "resources": resources, "verbs": [verb]}
                for group, resources in sorted(by_group.items())
            ]
        role = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": [*rules, {"nonResourceURLs": ["*"], "verbs": ["get"]}],
        }
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "default"}],
        }
        account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}
        for base, obj in (
            ("/api/v1/namespaces/default/serviceaccounts", account),
            ("/apis/rbac.authorization.k8s.io/v1/clusterroles", role),
            ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding),
        ):
            self.api.request(
                "PATCH", f"{base}/{name}?fieldManager=kubectl-gpu-tests&force=true", obj,
                "application/apply-patch+yaml",
            )  # fmt: skip
        return self.kubeconfig_for(path, self.token(name, "default"))

    def _served(self) -> list[tuple[str, str, list[str]]]:
        """(group, resource or resource/subresource, verbs) of every resource served now."""
        found = []
        bases = [("", "/api/v1")] + [
            (g["name"], f"/apis/{g['name']}/{v['version']}")
            for g in self.api.get("/apis").get("groups") or []
            for v in g.get("versions") or []
        ]
        for group, base in bases:
            for resource in self.api.get(base).get("resources") or []:
                found.append((group, str(resource["name"]), list(resource.get("verbs") or [])))
        return found

    def kubeconfig_for(self, path: Path, token: str, namespace: str = "default") -> Path:
        return write_kubeconfig(
            path, self.api.url, self.api.ca, {"token": token}, user="sa", namespace=namespace
        )


def write_kubeconfig(
    path: Path,
    url: str,
    ca: Path | None,
    user_fields: dict[str, str],
    *,
    user: str,
    namespace: str = "default",
) -> Path:
    """A kubeconfig whose one context is `user` at `url`; no `ca` for a plain-HTTP address
    (a test's own socket that answers badly, or one nothing answers)."""
    server = {"server": url, **({"certificate-authority": str(ca)} if ca else {})}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kgpu-test", "cluster": server}],
        "users": [{"name": user, "user": user_fields}],
        "contexts": [
            {
                "name": "kgpu-test",
                "context": {"cluster": "kgpu-test", "user": user, "namespace": namespace},
            }
        ],
        "current-context": "kgpu-test",
        "preferences": {},
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


def plain_kubeconfig(path: Path, url: str) -> Path:
    """A kubeconfig for a plain-HTTP `url` with a placeholder token: a test's own socket that
    answers badly, or a port nothing answers."""
    return write_kubeconfig(path, url, None, {"token": PLACEHOLDER_TOKEN}, user="tester")
