"""The command lines of the control plane's Kubernetes components, as envtest runs them plus the
controllers: etcd, kube-apiserver (RBAC and the Node authorizer, its default admission plugins
and NodeRestriction, the audit log), kube-controller-manager and kube-scheduler; and etcd's
health check.

Owns `Flags` (what a plane's owner may change of the API server's command line) and one argv
builder per component. Must not spawn or wait (processes.py and `ControlPlane` do), pick ports
(ports.py) or speak to the API server; KWOK's command line is kwok.py's.
"""

from __future__ import annotations

import dataclasses
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from tests.kit.plane import certs

Argv = list[str | Path]


@dataclasses.dataclass(frozen=True)
class Flags:
    """`runtime_config` and `feature_gates` go to the API server as they are; without
    `node_authorizer` only RBAC authorizes; `audit`: the policy file and the log's path."""

    runtime_config: tuple[str, ...] = ()
    feature_gates: tuple[str, ...] = ()
    node_authorizer: bool = True
    audit: tuple[Path, Path] | None = None


def etcd(binary: Path, data_dir: Path, client_url: str, peer: int) -> Argv:
    return [
        binary,
        "--data-dir", data_dir,
        "--listen-client-urls", client_url,
        "--advertise-client-urls", client_url,
        "--listen-peer-urls", f"http://127.0.0.1:{peer}",
        "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
        "--initial-cluster", f"default=http://127.0.0.1:{peer}",
        "--unsafe-no-fsync",
        "--log-level", "warn",
    ]  # fmt: skip


def etcd_healthy(client_url: str) -> bool:
    with urllib.request.urlopen(f"{client_url}/health", timeout=2) as response:
        return bool(response.status == 200)


def apiserver(
    binary: Path, etcd_url: str, port: int, creds: certs.Credentials, flags: Flags
) -> Argv:
    c = creds
    args: Argv = [
        binary,
        "--etcd-servers", etcd_url,
        "--bind-address", "127.0.0.1",
        "--advertise-address", "127.0.0.1",
        "--endpoint-reconciler-type", "none",  # a loopback address has no endpoints to keep
        "--secure-port", str(port),
        "--tls-cert-file", c.serving_cert,
        "--tls-private-key-file", c.serving_key,
        "--client-ca-file", c.ca_cert,
        "--token-auth-file", c.token_file,
        "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
        "--service-account-key-file", c.service_account_pub,
        "--service-account-signing-key-file", c.service_account_key,
        "--service-cluster-ip-range", "10.0.0.0/24",
        "--authorization-mode", "Node,RBAC" if flags.node_authorizer else "RBAC",
        # where `kubectl logs` is proxied: each node's InternalIP and kubelet port, which
        # name KWOK's server (`kwok.with_kubelet`), checked against the test CA like a kubelet's
        "--kubelet-preferred-address-types", "InternalIP",
        "--kubelet-certificate-authority", c.ca_cert,
        "--enable-admission-plugins", "NodeRestriction",
        "--allow-privileged=true",
        "--profiling=false",
        "--v", "1",
    ]  # fmt: skip
    if flags.audit is not None:
        policy, log = flags.audit
        args += ["--audit-policy-file", policy,
                 "--audit-log-path", log, "--audit-log-maxbackup", "1",
                 # 0 would mean the log library's 100 MB: a 5,000-node rollout writes more,
                 # and a rotation midway loses what a reader counted from an offset
                 "--audit-log-maxsize", "4096"]  # fmt: skip
    if flags.runtime_config:
        args += ["--runtime-config", ",".join(flags.runtime_config)]
    if flags.feature_gates:
        args += ["--feature-gates", ",".join(flags.feature_gates)]
    return args


def controller_manager(
    binary: Path, kubeconfig: Path, creds: certs.Credentials, extra: Sequence[str]
) -> Argv:
    return [
        binary,
        "--kubeconfig", kubeconfig,
        "--leader-elect=false",
        "--secure-port", "0",
        "--service-account-private-key-file", creds.service_account_key,
        "--root-ca-file", creds.ca_cert,
        "--cluster-signing-cert-file", creds.ca_cert,
        "--cluster-signing-key-file", creds.ca_key,
        # quick to notice pods and nodes, as the tests change them often
        "--concurrent-daemonset-syncs", "4",
        "--v", "1",
        *extra,
    ]  # fmt: skip


def scheduler(binary: Path, kubeconfig: Path) -> Argv:
    return [
        binary,
        "--kubeconfig", kubeconfig,
        "--leader-elect=false",
        "--secure-port", "0",
        "--v", "1",
    ]  # fmt: skip
