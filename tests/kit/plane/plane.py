"""`ControlPlane`: Kubernetes' own etcd, kube-apiserver, kube-controller-manager, kube-scheduler
and KWOK, run as processes from the binaries scripts/gobins.py builds.

What envtest does for controller authors, plus the controllers and KWOK: the API server runs
with RBAC (and the Node authorizer), its default admission plugins (PodSecurity,
ValidatingAdmissionPolicy, ...) and NodeRestriction on; the controller-manager's DaemonSet,
ResourceClaim, disruption, garbage-collector and service-account controllers and the real
scheduler do the real work; KWOK keeps every Node heartbeating and turns scheduled pods
Running (all but those a test's node side starts itself, kwok.py), and its kubelet-like server
answers for every node's kubelet. There is no kubelet: the node side -- device plugin, kubelet
files, the agent -- is simulated by tests/kit on top.

Owns the plane as a whole: its options, the order its components start and stop in, its
directory, ports and admin kubeconfig, the releases it runs and their binaries (found by
tests/kit/kube/builds.py), and the one face the kit and the tests use (`request`, `get`,
`client`, `token`, `user_denied`, `kubeconfig_for`, `with_kubelet`, `audit`, `requests`). Each noun
behind that face has its module: processes.py (spawn, keep, wait, end), components.py (the
Kubernetes components' command lines), kwok.py (KWOK and its gate), crds.py, rawapi.py (the
admin's raw requests), users.py (tokens, users, kubeconfigs), auditlog.py. Must not know
anything about GPUs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

from tests.kit.kube import builds
from tests.kit.kube.client import KubeClient
from tests.kit.plane import auditlog, certs, components, crds, kwok
from tests.kit.plane.ports import free_port
from tests.kit.plane.processes import Component, ControlPlaneError, Processes
from tests.kit.plane.rawapi import RawApi
from tests.kit.plane.users import Users, write_kubeconfig

__all__ = [
    "VERSIONS",
    "ControlPlane",
    "ControlPlaneError",
    "binaries",
    "chosen_version",
    "wait_for",
]
DEFAULT_VERSION = "1.37"
# a release the plane runs → the gobins target that builds its binaries
VERSIONS = {"1.37": "kubernetes-1.37", "1.34": "kubernetes-1.34"}


def chosen_version() -> str:
    """The release the tests run against: KUBECTL_GPU_CONTROL_PLANE (make test K8S=1.34)."""
    return os.environ.get("KUBECTL_GPU_CONTROL_PLANE") or DEFAULT_VERSION


def binaries(version: str = DEFAULT_VERSION) -> dict[str, Path]:
    """Paths of every program the control plane runs (and `kwok-stages`, the folder of KWOK's
    stage definitions), built first if the cache lacks them (a cold Kubernetes build takes
    minutes: its progress is shown)."""
    found: dict[str, Path] = {}
    for target in (VERSIONS[version], "etcd", "kwok"):
        found |= builds.programs(target, quiet=False)
    found["kwok-stages"] = found["kwok"].parent
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
        ADMITTED (see kwok.NODE_SIDE_KUBELET; the plane's owner runs admitter.py for the nodes
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
        self.bins: dict[str, Path] = {}
        self.port = 0
        self.etcd_url = ""
        # KWOK's server: the kubelet endpoint every node names (`with_kubelet`)
        self.kubelet_address = "127.0.0.1"
        self.kubelet_port = 0
        self.kubeconfig = self.dir / "admin.kubeconfig"
        self.audit_log = self.dir / "audit.log"  # one line per request received (`requests`)
        self.creds: certs.Credentials | None = None
        self._processes = Processes(self.dir)
        self._api: RawApi | None = None  # the admin's, once the API server's port is known
        self._client: KubeClient | None = None  # the official client's, once asked for

    # ---- lifetime ---------------------------------------------------------------------------

    def start(self, timeout: float = 90.0) -> ControlPlane:
        self.bins = binaries(self.version)
        self._processes.keep(remove=self._own_dir)  # ends the components if this process dies
        self.creds = certs.make(self.dir / "pki", self.kubelet_addresses)
        deadline = time.monotonic() + timeout
        try:
            self._processes.on_free_ports(lambda: self._start_etcd(deadline))
            self._processes.on_free_ports(lambda: self._start_apiserver(deadline))
            write_kubeconfig(
                self.kubeconfig, self.url, self.creds.ca_cert,
                {"token": self.creds.admin_token}, user="admin",
            )  # fmt: skip
            if self.want_controllers:
                self._spawn_controller_manager()
            if self.want_scheduler:
                self._spawn_scheduler()
            if self.want_kwok:
                crds.serve(self._admin(), kwok.LOGS_CRD, deadline)
                self._spawn_kwok()
            self._wait_default_service_account(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        self._processes.stop()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def components(self) -> list[Component]:
        """The processes running now, in the order they started."""
        return self._processes.components

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def client(self) -> KubeClient:
        """The official kubernetes client as the administrator, by name (tests.kit.kube.client):
        one per plane, so its discovery is read once for all the tests on the plane."""
        if self._client is None:
            self._client = KubeClient(self.kubeconfig, self.dir / "discovery-cache.json")
        return self._client

    @property
    def kubectl(self) -> Path:
        """kubectl of the server's own release."""
        return self.bins["kubectl"]

    def server_version(self) -> str:
        return str(self.get("/version")["gitVersion"])

    # ---- components (their command lines: components.py, kwok.py) ----------------------------

    def _start_etcd(self, deadline: float) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        argv = components.etcd(self.bins["etcd"], self.dir / "etcd", self.etcd_url, peer)
        etcd = self._processes.spawn("etcd", argv)
        self._processes.wait(etcd, deadline, lambda: components.etcd_healthy(self.etcd_url))

    def _start_apiserver(self, deadline: float) -> None:
        assert self.creds is not None
        self.port = free_port()
        self._api = RawApi(self.url, self.creds.admin_token, self.creds.ca_cert)
        audit = (auditlog.write_policy(self.dir), self.audit_log) if self.want_audit else None
        flags = components.Flags(
            self.runtime_config, self.feature_gates, self.node_authorizer, audit
        )
        argv = components.apiserver(
            self.bins["kube-apiserver"], self.etcd_url, self.port, self.creds, flags
        )
        apiserver = self._processes.spawn("kube-apiserver", argv)
        self._processes.wait(apiserver, deadline, lambda: self._admin().ready("/readyz"))

    def _spawn_controller_manager(self) -> None:
        assert self.creds is not None
        binary = self.bins["kube-controller-manager"]
        argv = components.controller_manager(
            binary, self.kubeconfig, self.creds, self.controller_manager_args
        )
        self._processes.spawn("kube-controller-manager", argv)

    def _spawn_scheduler(self) -> None:
        argv = components.scheduler(self.bins["kube-scheduler"], self.kubeconfig)
        self._processes.spawn("kube-scheduler", argv)

    def _spawn_kwok(self) -> None:
        assert self.creds is not None
        self.kubelet_port = free_port()
        argv = kwok.argv(
            self.bins["kwok"], self.bins["kwok-stages"], self.dir, self.kubeconfig, self.creds,
            address=self.kubelet_address, port=self.kubelet_port,
            lease_seconds=self.node_lease_seconds, node_side_gate=self.node_side_gate,
        )  # fmt: skip
        self._processes.spawn("kwok", argv)

    def _wait_default_service_account(self, deadline: float) -> None:
        """The controller-manager is working once it has made `default` in `default`."""
        if not self.want_controllers:
            return
        path = "/api/v1/namespaces/default/serviceaccounts/default"
        self._processes.wait_all(
            deadline,
            lambda: self.get(path),
            failure="the controller-manager made no default ServiceAccount in time",
        )

    def with_kubelet(self, node: dict[str, Any]) -> dict[str, Any]:
        """`node` (an object to create) with KWOK's server as its kubelet: its InternalIP and
        kubelet port, which the API server dials for `kubectl logs` on the node's pods."""
        return kwok.with_kubelet(node, self.kubelet_address, self.kubelet_port)

    # ---- the audit log (auditlog.py) ----------------------------------------------------------

    def audit(self) -> list[dict[str, Any]]:
        """The audit events so far (RequestReceived and ResponseComplete of each request)."""
        return auditlog.events(self.audit_log)

    def requests(self, user_agent: str) -> list[str]:
        """`VERB requestURI` of each request the server received from `user_agent`."""
        return auditlog.requests(self.audit_log, user_agent)

    # ---- raw access and users, for the harness itself (rawapi.py, users.py) -------------------

    def _admin(self) -> RawApi:
        assert self._api is not None, "the plane has not started its API server"
        return self._api

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> Any:
        """One request as the admin; a failure raises `tests.kit.kube.ApiError`."""
        return self._admin().request(method, path, body, content_type)

    def get(self, path: str) -> Any:
        return self._admin().get(path)

    def token(
        self,
        service_account: str,
        namespace: str,
        *,
        bound_kind: str | None = None,
        bound_name: str | None = None,
        seconds: int = 3600,
    ) -> str:
        """A token the API server issues for a ServiceAccount (see `Users.token`)."""
        return Users(self._admin()).token(
            service_account, namespace, bound_kind=bound_kind, bound_name=bound_name,
            seconds=seconds,
        )  # fmt: skip

    def user_denied(self, name: str, path: Path, denied: Collection[tuple[str, str, str]]) -> Path:
        """A kubeconfig for ServiceAccount `name` allowed all but `denied` (`Users.user_denied`)."""
        return Users(self._admin()).user_denied(name, path, denied)

    def kubeconfig_for(self, path: Path, token: str, namespace: str = "default") -> Path:
        return Users(self._admin()).kubeconfig_for(path, token, namespace)
