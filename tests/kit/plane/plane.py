"""`ControlPlane`: Kubernetes' own etcd, kube-apiserver, kube-controller-manager, kube-scheduler
and KWOK, run as processes from the binaries scripts/gobins.py builds.

What envtest does for controller authors, plus the controllers and KWOK: the API server runs
with RBAC (and the Node authorizer), its default admission plugins (PodSecurity,
ValidatingAdmissionPolicy, ...) and NodeRestriction on; the controller-manager's DaemonSet,
ResourceClaim, disruption, garbage-collector and service-account controllers and the real
scheduler do the real work; KWOK keeps every Node heartbeating and turns scheduled pods
Running (all but those a test's node side starts itself: LIFECYCLE_BY_TEST), and its
kubelet-like server answers for every node's kubelet where the API server proxies `kubectl
logs` (TLS with a certificate of the test CA, which the API server checks; what it serves is
named by KWOK `Logs` objects, see containerlogs.py). There is no kubelet: the node side --
device plugin, kubelet files, the agent -- is simulated by tests/kit on top.
Owns processes (and their keeper, keeper.py), ports, files and the admin kubeconfig; must not
know anything about GPUs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.kit.kube import errors
from tests.kit.plane import certs

ROOT = Path(__file__).resolve().parents[3]
# What RBAC rules may grant on resources (`user_denied`).
VERBS = frozenset(
    "get list watch create update patch delete deletecollection "
    "bind escalate impersonate use approve sign attest".split()
)
# KWOK's `Logs` (kwok.x-k8s.io/v1alpha1): which file its server answers a container's logs
# from. KWOK watches these (--enable-crds) but does not define the CRD; this is the least of it.
LOGS_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "logs.kwok.x-k8s.io"},
    "spec": {
        "group": "kwok.x-k8s.io",
        "scope": "Namespaced",
        "names": {"plural": "logs", "singular": "logs", "kind": "Logs", "listKind": "LogsList"},
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}
# Pods annotated so are left to the test's own node side, which plays their whole lifecycle
# (KWOK's "fast" pod-ready stage would make every bound pod Running and Ready at once: a
# container that crashes at start would look Ready for a while, an init container that keeps
# failing could not hold its pod Pending).
LIFECYCLE_BY_TEST = "test.kubectl-gpu.io/lifecycle-by-node-side"
# With `node_side_gate`, a pod that asks for an extended resource (a device plugin's) or uses
# ResourceClaims becomes Running only once a kubelet has admitted it and annotated it ADMITTED,
# as a kubelet starts a pod's containers only after its device allocation succeeded and its
# DRA drivers prepared its claims (NodePrepareResources): on a node annotated
# NODE_SIDE_KUBELET the test's kubelet stand-in does (tests/kit), on any other node
# admitter.py admits it at once (no kubelet of its own to ask).
NODE_SIDE_KUBELET = "test.kubectl-gpu.io/kubelet"
ADMITTED = "test.kubectl-gpu.io/admitted"
# The gate (a gojq expression over the pod, KWOK's selector keys): "waiting" for a pod whose
# containers ask for an extended resource (a domain-prefixed name outside kubernetes.io), or
# that uses ResourceClaims, and that the kubelet stand-in has not admitted yet; nothing
# otherwise.
_WAITING_FOR_ADMISSION = (
    "if (([(.spec.containers // [])[], (.spec.initContainers // [])[] | .resources // {} "
    "| (.limits // {}), (.requests // {}) | keys[] "
    '| select(contains("/") and (startswith("kubernetes.io/") | not))] | length > 0) '
    "or ((.spec.resourceClaims // []) | length > 0)) "
    f'and (.metadata.annotations["{ADMITTED}"] == null) then "waiting" else empty end'
)
DEFAULT_VERSION = "1.37"
PLACEHOLDER_TOKEN = "placeholder-token"  # `plain_kubeconfig`'s: must never be printed
VERSIONS = {"1.37": "kubernetes-1.37", "1.34": "kubernetes-1.34"}


def chosen_version() -> str:
    """The release the tests run against: KUBECTL_GPU_CONTROL_PLANE (make test K8S=1.34)."""
    return os.environ.get("KUBECTL_GPU_CONTROL_PLANE") or DEFAULT_VERSION


def _gobins() -> Any:
    sys.path.insert(0, str(ROOT / "scripts"))  # a script of the repository's, not a package
    try:
        return importlib.import_module("gobins")
    finally:
        sys.path.pop(0)


def binaries(version: str = DEFAULT_VERSION) -> dict[str, Path]:
    """Paths of every program the control plane runs, built first if the cache lacks them."""
    gobins = _gobins()
    found: dict[str, Path] = {}
    for target in (VERSIONS[version], "etcd", "kwok"):
        directory = gobins.ensure(target)
        for binary in gobins.resolve(target).binaries:
            found[binary] = directory / binary
        if target == "kwok":
            found["kwok-stages"] = directory
    return found


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60) -> Any:
    """`check()`'s first truthy value, looked for every 0.3 s: the real controllers act on
    their own time; an AssertionError naming `what` when it never comes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclasses.dataclass
class Component:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class ControlPlaneError(RuntimeError):
    pass


class ControlPlane:
    """A whole control plane on 127.0.0.1, in a directory of its own."""

    def __init__(
        self,
        version: str | None = None,
        *,
        directory: Path | None = None,
        kwok: bool = True,
        controllers: bool = True,
        scheduler: bool = True,
        runtime_config: Sequence[str] = (),
        feature_gates: Sequence[str] = (),
        audit: bool = True,
        node_lease_seconds: int = 40,
        controller_manager_args: Sequence[str] = (),
        node_authorizer: bool = True,
        kubelet_addresses: Sequence[str] = (),
        node_side_gate: bool = False,
    ) -> None:
        """`runtime_config` and `feature_gates` go to the API server as they are. Without
        `node_authorizer` only RBAC authorizes: a plane told not to serve resource.k8s.io/v1
        (`resource.k8s.io/v1=false`, to answer as a 1.32 or 1.33 server does) needs that, as the
        Node authorizer's graph watches v1 ResourceSlices and the server never becomes ready
        without them (and so do the controller-manager and the scheduler: leave them off too).
        `audit`, `node_lease_seconds` and `controller_manager_args` are for the fleet
        benchmarks: at thousands of nodes the audit log and KWOK's lease renewals (every quarter
        of the lease, one write per node) are most of what the server does; leases of an hour
        need the node-lifecycle-controller off (it would find the nodes unreachable), and the
        DaemonSet controller a higher client rate than its 20 requests/s. `kubelet_addresses`:
        node InternalIPs, besides 127.0.0.1, at which a test serves KWOK's kubelet endpoint
        (a node in a network namespace of its own): its certificate names them.
        `node_side_gate`: KWOK starts a pod asking for an extended resource only once it is
        ADMITTED (see NODE_SIDE_KUBELET; the plane's owner runs admitter.py for the nodes
        without a kubelet stand-in)."""
        version = version or chosen_version()
        if version not in VERSIONS:
            raise ValueError(
                f"unknown Kubernetes version {version!r}; known: {', '.join(VERSIONS)}"
            )
        self.version = version
        self._own_dir = directory is None
        self.dir = directory or Path(tempfile.mkdtemp(prefix="kgpu-cp-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.want_kwok = kwok
        self.want_controllers = controllers
        self.want_scheduler = scheduler
        self.runtime_config = tuple(runtime_config)
        self.feature_gates = tuple(feature_gates)
        self.want_audit = audit
        self.node_lease_seconds = node_lease_seconds
        self.controller_manager_args = tuple(controller_manager_args)
        self.node_authorizer = node_authorizer
        self.kubelet_addresses = tuple(kubelet_addresses)
        self.node_side_gate = node_side_gate
        self.components: list[Component] = []
        self.bins: dict[str, Path] = {}
        self.port = 0
        # KWOK's server: the kubelet endpoint every node names (`with_kubelet`)
        self.kubelet_address = "127.0.0.1"
        self.kubelet_port = 0
        self.kubeconfig = self.dir / "admin.kubeconfig"
        self.audit_log = self.dir / "audit.log"  # one line per request received (`requests`)
        self.creds: certs.Credentials | None = None
        self._keeper: _Keeper | None = None  # ends the components if this process dies

    # ---- lifetime ---------------------------------------------------------------------------

    def start(self, timeout: float = 90.0) -> ControlPlane:
        self.bins = binaries(self.version)
        self._keeper = _Keeper()
        if self._own_dir:
            self._keeper.tell("remove", self.dir)
        self.creds = certs.make(self.dir / "pki", self.kubelet_addresses)
        deadline = time.monotonic() + timeout
        try:
            self._on_free_ports(lambda: self._start_etcd(deadline))
            self._on_free_ports(lambda: self._start_apiserver(deadline))
            self._write_kubeconfig()
            if self.want_controllers:
                self._start_controller_manager()
            if self.want_scheduler:
                self._start_scheduler()
            if self.want_kwok:
                self._serve_crd(LOGS_CRD, deadline)
                self._start_kwok()
            self._wait_default_service_account(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for component in reversed(self.components):
            _terminate(component.process)
            if self._keeper is not None:
                self._keeper.tell("forget", component.process.pid)
        self.components.clear()
        if self._keeper is not None:
            self._keeper.close()
            self._keeper = None
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def kubectl(self) -> Path:
        """kubectl of the server's own release."""
        return self.bins["kubectl"]

    def server_version(self) -> str:
        return str(self.get("/version")["gitVersion"])

    # ---- components -------------------------------------------------------------------------

    def _spawn(self, name: str, args: Sequence[str | Path]) -> Component:
        log = self.dir / f"{name}.log"
        handle = open(log, "wb")  # noqa: SIM115 - the child keeps it
        process = subprocess.Popen(
            [str(a) for a in args],
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.dir,
            start_new_session=True,  # a Ctrl-C in the test's terminal is the harness's to handle
        )
        handle.close()
        if self._keeper is not None:
            self._keeper.tell("keep", process.pid)  # its own group: pgid == pid
        component = Component(name, process, log)
        self.components.append(component)
        return component

    def _on_free_ports(self, start: Callable[[], None], tries: int = 3) -> None:
        """`start` (pick free ports, spawn, wait) again when a port it picked was taken before
        its component bound it: `free_port` must let the port go, and on a machine running
        several planes another process may bind it first."""
        for attempt in range(1, tries + 1):
            try:
                start()
                return
            except ControlPlaneError as e:
                if "address already in use" not in str(e) or attempt == tries:
                    raise
                self.components.pop()  # the component that lost the race has exited

    def _start_etcd(self, deadline: float) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        etcd = self._spawn(
            "etcd",
            [
                self.bins["etcd"],
                "--data-dir", self.dir / "etcd",
                "--listen-client-urls", self.etcd_url,
                "--advertise-client-urls", self.etcd_url,
                "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-cluster", f"default=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync",
                "--log-level", "warn",
            ],
        )  # fmt: skip
        self._wait(etcd, deadline, lambda: _http_ok(f"{self.etcd_url}/health"))

    def _start_apiserver(self, deadline: float) -> None:
        assert self.creds is not None
        c = self.creds
        self.port = free_port()
        runtime = ",".join(self.runtime_config)
        gates = ",".join(self.feature_gates)
        args: list[str | Path] = [
            self.bins["kube-apiserver"],
            "--etcd-servers", self.etcd_url,
            "--bind-address", "127.0.0.1",
            "--advertise-address", "127.0.0.1",
            "--endpoint-reconciler-type", "none",  # a loopback address has no endpoints to keep
            "--secure-port", str(self.port),
            "--tls-cert-file", c.serving_cert,
            "--tls-private-key-file", c.serving_key,
            "--client-ca-file", c.ca_cert,
            "--token-auth-file", c.token_file,
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file", c.service_account_pub,
            "--service-account-signing-key-file", c.service_account_key,
            "--service-cluster-ip-range", "10.0.0.0/24",
            "--authorization-mode", "Node,RBAC" if self.node_authorizer else "RBAC",
            # where `kubectl logs` is proxied: each node's InternalIP and kubelet port, which
            # name KWOK's server (`with_kubelet`), checked against the test CA like a kubelet's
            "--kubelet-preferred-address-types", "InternalIP",
            "--kubelet-certificate-authority", c.ca_cert,
            "--enable-admission-plugins", "NodeRestriction",
            "--allow-privileged=true",
            "--profiling=false",
            "--v", "1",
        ]  # fmt: skip
        if self.want_audit:
            args += ["--audit-policy-file", self._audit_policy(),
                     "--audit-log-path", self.audit_log, "--audit-log-maxbackup", "1",
                     # 0 would mean the log library's 100 MB: a 5,000-node rollout writes more,
                     # and a rotation midway loses what a reader counted from an offset
                     "--audit-log-maxsize", "4096"]  # fmt: skip
        if runtime:
            args += ["--runtime-config", runtime]
        if gates:
            args += ["--feature-gates", gates]
        apiserver = self._spawn("kube-apiserver", args)
        self._wait(apiserver, deadline, lambda: self._ready("/readyz"))

    def _audit_policy(self) -> Path:
        """Every request when it arrives (a watch too, while it is still open) and when it is
        answered (with its status code)."""
        policy = self.dir / "audit-policy.yaml"
        policy.write_text(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\n"
            "omitStages: [ResponseStarted, Panic]\n"
            "rules:\n- level: Metadata\n"
        )
        return policy

    def audit(self) -> list[dict[str, Any]]:
        """The audit events so far (RequestReceived and ResponseComplete of each request)."""
        try:
            lines = self.audit_log.read_text().splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in lines if line.strip()]

    def requests(self, user_agent: str) -> list[str]:
        """`VERB requestURI` of each request the server received from `user_agent`."""
        return [
            f"{e.get('verb', '').upper()} {e.get('requestURI', '')}"
            for e in self.audit()
            if e.get("userAgent") == user_agent and e.get("stage") == "RequestReceived"
        ]

    def _start_controller_manager(self) -> None:
        assert self.creds is not None
        self._spawn(
            "kube-controller-manager",
            [
                self.bins["kube-controller-manager"],
                "--kubeconfig", self.kubeconfig,
                "--leader-elect=false",
                "--secure-port", "0",
                "--service-account-private-key-file", self.creds.service_account_key,
                "--root-ca-file", self.creds.ca_cert,
                "--cluster-signing-cert-file", self.creds.ca_cert,
                "--cluster-signing-key-file", self.creds.ca_key,
                # quick to notice pods and nodes, as the tests change them often
                "--concurrent-daemonset-syncs", "4",
                "--v", "1",
                *self.controller_manager_args,
            ],
        )  # fmt: skip

    def _start_scheduler(self) -> None:
        self._spawn(
            "kube-scheduler",
            [
                self.bins["kube-scheduler"],
                "--kubeconfig", self.kubeconfig,
                "--leader-elect=false",
                "--secure-port", "0",
                "--v", "1",
            ],
        )  # fmt: skip

    def _start_kwok(self) -> None:
        """KWOK with its own "fast" stages: nodes Ready at once and kept alive by Leases (no
        status write per heartbeat, so a watcher of its Node is not woken), pods Running (but
        those annotated LIFECYCLE_BY_TEST); and
        its server, which answers `containerLogs` from the files its `Logs` objects name."""
        assert self.creds is not None
        stages = [
            self._leaving_test_pods(stage) if stage.name == "pod-ready.yaml" else stage
            for stage in sorted(self.bins["kwok-stages"].glob("*.yaml"))
        ]
        self.kubelet_port = free_port()
        # A container nothing has written for has an empty log, as on a kubelet (KWOK answers
        # 400 "no logs found" for a pod no Logs object names, unless a ClusterLogs does).
        empty = self.dir / "empty.log"
        empty.touch()
        any_pod = self.dir / "kwok-logs.yaml"
        any_pod.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kwok.x-k8s.io/v1alpha1",
                    "kind": "ClusterLogs",
                    "metadata": {"name": "empty-unless-written"},
                    "spec": {"logs": [{"logsFile": str(empty)}]},
                }
            )
        )
        self._spawn(
            "kwok",
            [
                self.bins["kwok"],
                "--kubeconfig", self.kubeconfig,
                "--manage-all-nodes=true",
                "--node-lease-duration-seconds", str(self.node_lease_seconds),
                # a node made without addresses gets these from node-initialize
                "--node-ip", self.kubelet_address,
                "--node-port", str(self.kubelet_port),
                "--server-address", f"{self.kubelet_address}:{self.kubelet_port}",
                "--tls-cert-file", self.creds.kubelet_cert,
                "--tls-private-key-file", self.creds.kubelet_key,
                "--enable-crds", "Logs",
                *(arg for config in (*stages, any_pod) for arg in ("--config", config)),
            ],
        )  # fmt: skip

    def _leaving_test_pods(self, stage: Path) -> Path:
        """KWOK's pod-ready stage, but for pods annotated LIFECYCLE_BY_TEST (and, with
        `node_side_gate`, for pods waiting for a kubelet's admission)."""
        ready = yaml.safe_load(stage.read_text())
        expressions = ready["spec"]["selector"]["matchExpressions"]
        expressions.append(
            {"key": f'.metadata.annotations["{LIFECYCLE_BY_TEST}"]', "operator": "DoesNotExist"}
        )
        if self.node_side_gate:
            expressions.append({"key": _WAITING_FOR_ADMISSION, "operator": "DoesNotExist"})
        derived = self.dir / stage.name
        derived.write_text(yaml.safe_dump(ready, sort_keys=False))
        return derived

    def with_kubelet(self, node: dict[str, Any]) -> dict[str, Any]:
        """`node` (an object to create) with KWOK's server as its kubelet: its InternalIP and
        kubelet port, which the API server dials for `kubectl logs` on the node's pods."""
        status = node.setdefault("status", {})
        others = [a for a in status.get("addresses") or [] if a.get("type") != "InternalIP"]
        status["addresses"] = [{"type": "InternalIP", "address": self.kubelet_address}, *others]
        status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": self.kubelet_port}}
        return node

    def _serve_crd(self, crd: dict[str, Any], deadline: float) -> None:
        """Create a CRD and wait until the server says it is established."""
        self.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
        while time.monotonic() < deadline:
            conditions = (self.get(path).get("status") or {}).get("conditions") or []
            if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                return
            time.sleep(0.1)
        raise ControlPlaneError(f"CRD {crd['metadata']['name']} was not established in time")

    # ---- waiting ----------------------------------------------------------------------------

    def _wait(self, component: Component, deadline: float, ready: Any) -> None:
        while time.monotonic() < deadline:
            if component.process.poll() is not None:
                raise ControlPlaneError(
                    f"{component.name} exited with {component.process.returncode}:\n"
                    f"{component.tail()}"
                )
            with contextlib.suppress(Exception):
                if ready():
                    return
            time.sleep(0.2)
        raise ControlPlaneError(f"{component.name} was not ready in time:\n{component.tail()}")

    def _wait_default_service_account(self, deadline: float) -> None:
        """The controller-manager is working once it has made `default` in `default`."""
        if not self.want_controllers:
            return
        path = "/api/v1/namespaces/default/serviceaccounts/default"
        while time.monotonic() < deadline:
            for component in self.components:
                if component.process.poll() is not None:
                    raise ControlPlaneError(
                        f"{component.name} exited with {component.process.returncode}:\n"
                        f"{component.tail()}"
                    )
            with contextlib.suppress(Exception):
                self.get(path)
                return
            time.sleep(0.2)
        raise ControlPlaneError("the controller-manager made no default ServiceAccount in time")

    # ---- raw access, for the harness itself ---------------------------------------------------

    def _context(self) -> ssl.SSLContext:
        assert self.creds is not None
        return ssl.create_default_context(cafile=str(self.creds.ca_cert))

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> Any:
        assert self.creds is not None
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.creds.admin_token}")
        if data is not None:
            request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, context=self._context(), timeout=10) as response:
                payload = response.read()
        except urllib.error.HTTPError as exc:  # as the harness's other clients: an ApiError
            raise errors.from_response(exc.code, exc.read()) from None
        return json.loads(payload) if payload[:1] in (b"{", b"[") else payload.decode()

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def _ready(self, path: str) -> bool:
        answer: object = self.get(path)
        return answer == "ok"

    def _write_kubeconfig(self) -> None:
        assert self.creds is not None
        write_kubeconfig(
            self.kubeconfig,
            self.url,
            self.creds.ca_cert,
            {"token": self.creds.admin_token},
            user="admin",
        )

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
            obj = self.get(
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
        answer = self.request(
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
            self.request(
                "PATCH", f"{base}/{name}?fieldManager=kubectl-gpu-tests&force=true", obj,
                "application/apply-patch+yaml",
            )  # fmt: skip
        return self.kubeconfig_for(path, self.token(name, "default"))

    def _served(self) -> list[tuple[str, str, list[str]]]:
        """(group, resource or resource/subresource, verbs) of every resource served now."""
        found = []
        bases = [("", "/api/v1")] + [
            (g["name"], f"/apis/{g['name']}/{v['version']}")
            for g in self.get("/apis").get("groups") or []
            for v in g.get("versions") or []
        ]
        for group, base in bases:
            for resource in self.get(base).get("resources") or []:
                found.append((group, str(resource["name"]), list(resource.get("verbs") or [])))
        return found

    def kubeconfig_for(self, path: Path, token: str, namespace: str = "default") -> Path:
        assert self.creds is not None
        return write_kubeconfig(
            path, self.url, self.creds.ca_cert, {"token": token}, user="sa", namespace=namespace
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


class _Keeper:
    """keeper.py, fed through a pipe only this process holds: if this process dies in any way,
    the pipe closes and the keeper ends every component still kept."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-I", str(Path(__file__).with_name("keeper.py"))],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # not stopped by a signal sent to the test's group
        )

    def tell(self, verb: str, argument: object) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{verb} {argument}\n")
        self.process.stdin.flush()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(10)


def _http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as response:
        return bool(response.status == 200)


def _terminate(process: subprocess.Popen[bytes], grace: float = 5.0) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
