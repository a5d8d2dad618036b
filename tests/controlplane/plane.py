"""`ControlPlane`: Kubernetes' own etcd, kube-apiserver, kube-controller-manager, kube-scheduler
and KWOK, run as processes from the binaries scripts/gobins.py builds.

What envtest does for controller authors, plus the controllers and KWOK: the API server runs
with RBAC (and the Node authorizer), its default admission plugins (PodSecurity,
ValidatingAdmissionPolicy, ...) and NodeRestriction on; the controller-manager's DaemonSet,
ResourceClaim, disruption, garbage-collector and service-account controllers and the real
scheduler do the real work; KWOK keeps every Node heartbeating and turns scheduled pods
Running (there is no kubelet: the node side -- device plugin, kubelet files, the agent -- is
simulated by tests/fakes on top of this). Owns processes, ports, files and the admin
kubeconfig; must not know anything about GPUs.
"""

from __future__ import annotations

import contextlib
import dataclasses
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
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.controlplane import certs

ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT_VERSION = "1.37"
VERSIONS = {"1.37": "kubernetes-1.37", "1.34": "kubernetes-1.34"}


def chosen_version() -> str:
    """The release the tests run against: KUBECTL_GPU_CONTROL_PLANE (make test K8S=1.34)."""
    return os.environ.get("KUBECTL_GPU_CONTROL_PLANE") or DEFAULT_VERSION


def _gobins() -> Any:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gobins
    finally:
        sys.path.pop(0)
    return gobins


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
    ) -> None:
        """`audit`, `node_lease_seconds` and `controller_manager_args` are for the fleet
        benchmarks: at thousands of nodes the audit log and KWOK's lease renewals (every quarter
        of the lease, one write per node) are most of what the server does; leases of an hour
        need the node-lifecycle-controller off (it would find the nodes unreachable), and the
        DaemonSet controller a higher client rate than its 20 requests/s."""
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
        self.components: list[Component] = []
        self.bins: dict[str, Path] = {}
        self.port = 0
        self.kubeconfig = self.dir / "admin.kubeconfig"
        self.audit_log = self.dir / "audit.log"  # one line per request received (`requests`)
        self.creds: certs.Credentials | None = None

    # ---- lifetime ---------------------------------------------------------------------------

    def start(self, timeout: float = 90.0) -> ControlPlane:
        self.bins = binaries(self.version)
        self.creds = certs.make(self.dir / "pki")
        deadline = time.monotonic() + timeout
        try:
            self._start_etcd(deadline)
            self._start_apiserver(deadline)
            self._write_kubeconfig()
            if self.want_controllers:
                self._start_controller_manager()
            if self.want_scheduler:
                self._start_scheduler()
            if self.want_kwok:
                self._start_kwok()
            self._wait_default_service_account(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for component in reversed(self.components):
            _terminate(component.process)
        self.components.clear()
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
        component = Component(name, process, log)
        self.components.append(component)
        return component

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
            "--authorization-mode", "Node,RBAC",
            "--enable-admission-plugins", "NodeRestriction",
            "--allow-privileged=true",
            "--profiling=false",
            "--v", "1",
        ]  # fmt: skip
        if self.want_audit:
            args += ["--audit-policy-file", self._audit_policy(),
                     "--audit-log-path", self.audit_log, "--audit-log-maxbackup", "1"]  # fmt: skip
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
        status write per heartbeat, so a watcher of its Node is not woken), pods Running."""
        stages = sorted(self.bins["kwok-stages"].glob("*.yaml"))
        self._spawn(
            "kwok",
            [
                self.bins["kwok"],
                "--kubeconfig", self.kubeconfig,
                "--manage-all-nodes=true",
                "--node-lease-duration-seconds", str(self.node_lease_seconds),
                "--server-address", f"127.0.0.1:{free_port()}",
                *(arg for stage in stages for arg in ("--config", stage)),
            ],
        )  # fmt: skip

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

    def request(self, method: str, path: str, body: Any = None) -> Any:
        assert self.creds is not None
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.creds.admin_token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, context=self._context(), timeout=10) as response:
            payload = response.read()
        return json.loads(payload) if payload[:1] in (b"{", b"[") else payload.decode()

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def _ready(self, path: str) -> bool:
        return self.get(path) == "ok"

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

    def kubeconfig_for(self, path: Path, token: str, namespace: str = "default") -> Path:
        assert self.creds is not None
        return write_kubeconfig(
            path, self.url, self.creds.ca_cert, {"token": token}, user="sa", namespace=namespace
        )


def write_kubeconfig(
    path: Path,
    url: str,
    ca: Path,
    user_fields: dict[str, str],
    *,
    user: str,
    namespace: str = "default",
) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "kgpu-test", "cluster": {"server": url, "certificate-authority": str(ca)}}
        ],
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
