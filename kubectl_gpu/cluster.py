"""The Kubernetes API: connecting, raw JSON requests, and errors in the user's words.

The only module that imports `kubernetes`. It reads and writes plain JSON through
`ApiClient.call_api(..., _preload_content=False)` rather than the generated `V1…`
models: about ten times faster on large lists (STYLE.md §4), and any resource,
custom or not, works the same way. Every `ApiException` and transport error becomes
a `ClusterError` here, once. Must not decide anything: an `if` here is about the
protocol (paging, status codes), never about GPUs.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from urllib3.exceptions import HTTPError, ReadTimeoutError

from kubectl_gpu.errors import ClusterError

log = logging.getLogger(__name__)
Json = dict[str, Any]
PAGE_SIZE = 500
_MAX_BODY_IN_MESSAGE = 256

# path prefix, plural, namespaced
_RESOURCES: dict[str, tuple[str, str, bool]] = {
    "nodes": ("/api/v1", "nodes", False),
    "pods": ("/api/v1", "pods", True),
    "configmaps": ("/api/v1", "configmaps", True),
    "events": ("/api/v1", "events", True),
    "resourcequotas": ("/api/v1", "resourcequotas", True),
    "namespaces": ("/api/v1", "namespaces", False),
    "daemonsets": ("/apis/apps/v1", "daemonsets", True),
    "clusterpolicies": ("/apis/nvidia.com/v1", "clusterpolicies", False),
    "customresourcedefinitions": (
        "/apis/apiextensions.k8s.io/v1",
        "customresourcedefinitions",
        False,
    ),
    "gpunodereports": ("/apis/kubectl-gpu.io/v1", "gpunodereports", False),
    "runtimeclasses": ("/apis/node.k8s.io/v1", "runtimeclasses", False),
    "resourceclaims": ("/apis/resource.k8s.io/v1", "resourceclaims", True),
    "resourceslices": ("/apis/resource.k8s.io/v1", "resourceslices", False),
    "deviceclasses": ("/apis/resource.k8s.io/v1", "deviceclasses", False),
    "serviceaccounts": ("/api/v1", "serviceaccounts", True),
    "clusterroles": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "clusterrolebindings": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "roles": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "rolebindings": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "validatingadmissionpolicies": (
        "/apis/admissionregistration.k8s.io/v1",
        "validatingadmissionpolicies",
        False,
    ),
    "validatingadmissionpolicybindings": (
        "/apis/admissionregistration.k8s.io/v1",
        "validatingadmissionpolicybindings",
        False,
    ),
}
_PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}


def path(
    resource: str, name: str | None = None, namespace: str | None = None, version: str = ""
) -> str:
    """The REST path of a resource, a namespace of it, or one object (and `/status` etc.);
    `version` picks another served version of the resource's group (`v1beta1`)."""
    prefix, plural, namespaced = _RESOURCES[resource]
    if version:
        prefix = f"{prefix.rpartition('/')[0]}/{version}"
    parts = [prefix]
    if namespaced and namespace:
        parts.append(f"/namespaces/{quote(namespace, safe='')}")
    parts.append(f"/{plural}")
    if name:
        parts.append(f"/{quote(name, safe='')}")
    return "".join(parts)


@dataclasses.dataclass(frozen=True)
class LogTail:
    """How much of a container log to read: the last `lines`, at most `limit_bytes`, of the
    current instance or (`previous`) the one before the last restart."""

    lines: int = 50
    limit_bytes: int = 64 * 1024
    previous: bool = False


# The request policy, one for every command and the agent. A server that accepts no
# connection within CONNECT_TIMEOUT, or sends nothing for READ_TIMEOUT while answering, is
# given up on (before: about 61 s per command against a hung server); one that keeps sending
# a byte now and then (headers or body) is given up on when its answer has taken
# ANSWER_DEADLINE, and one whose answer grows past MAX_ANSWER_BYTES (a list page of unbounded
# size) is refused, not held in memory. Reads (GET) are tried once more after a refused or
# reset connection, a connect timeout or a 429/502/503/504 answer, RETRY_PAUSE later (or the
# server's Retry-After, at most MAX_RETRY_PAUSE); a read timeout or a passed deadline is not
# retried (a hung server stays hung) and neither is a write (it may have been applied).
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 20.0
ANSWER_DEADLINE = 60.0
MAX_ANSWER_BYTES = 256 * 1024 * 1024
RETRY_PAUSE = 0.5
MAX_RETRY_PAUSE = 2.0
_CHUNK = 64 * 1024
_RETRY_STATUSES = frozenset({429, 502, 503, 504})
# A watch hears at least a bookmark about every minute from kube-apiserver; this much
# silence means the connection is gone without a FIN (a NAT or load balancer dropped it).
WATCH_IDLE = 150.0


@dataclasses.dataclass(frozen=True)
class _Answer:
    """One HTTP answer, read whole."""

    status: int
    reason: str
    headers: Any
    data: bytes


class _TooSlow(Exception):
    """The answer did not finish within the request's deadline."""


class _TooLarge(Exception):
    """The answer grew past the size a request may hold in memory."""


def _body(raw: Any, deadline: float, limit: int) -> bytes:
    """The answer's body, read a chunk at a time: `read1` returns what has arrived, so the
    deadline is checked between chunks however slowly the bytes come."""
    read = raw.read1 if hasattr(raw, "read1") else raw.read  # urllib3 < 2.3 has no read1
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = read(_CHUNK)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise _TooLarge(size)
        chunks.append(chunk)
        if time.monotonic() > deadline:
            raise _TooSlow(size)


@dataclasses.dataclass
class _Watch:
    """One request's deadline (time.monotonic), and whether the connection was cut at it."""

    at: float
    expired: bool = False


class _Watching(threading.local):
    current: _Watch | None = None


_WATCHING = _Watching()  # the request this thread is sending now


def _cut(sock: socket.socket, watch: _Watch) -> None:
    watch.expired = True
    try:
        sock.shutdown(socket.SHUT_RDWR)  # the blocked read returns: the request fails now
    except OSError:
        pass


def _watched(base: Any) -> Any:
    """`base` (urllib3's connection class) whose wait for the status line and headers ends at
    the request's deadline: the socket's read timeout alone lets a server that sends a byte
    now and then hold a command for ever."""

    class Watched(base):  # type: ignore[misc]
        def getresponse(self, *args: Any, **kwargs: Any) -> Any:
            watch = _WATCHING.current
            if watch is None or self.sock is None:
                return super().getresponse(*args, **kwargs)
            timer = threading.Timer(max(0.0, watch.at - time.monotonic()), _cut,
                                    (self.sock, watch))  # fmt: skip
            timer.daemon = True
            timer.start()
            try:
                return super().getresponse(*args, **kwargs)
            finally:
                timer.cancel()

    return Watched


def _pools(pool_manager: Any) -> None:
    """Make every connection the client opens a watched one."""
    import urllib3

    classes = {}
    for scheme, pool in (
        ("http", urllib3.HTTPConnectionPool),
        ("https", urllib3.HTTPSConnectionPool),
    ):
        classes[scheme] = type(
            pool.__name__, (pool,), {"ConnectionCls": _watched(pool.ConnectionCls)}
        )
    pool_manager.pool_classes_by_scheme = classes


@dataclasses.dataclass
class Api:
    """A connection to one API server, as one kubeconfig context describes it."""

    client: Any  # kubernetes.client.ApiClient
    context: str
    server: str
    timeout: float = READ_TIMEOUT
    namespace: str = "default"  # the context's namespace, as kubectl defaults -n to it
    connect_timeout: float = CONNECT_TIMEOUT
    deadline: float = ANSWER_DEADLINE
    max_answer: int = MAX_ANSWER_BYTES
    # the credentials the kubeconfig's server URL carries, never to be printed (`redacted`)
    secrets: tuple[str, ...] = dataclasses.field(default=(), repr=False)

    def request(
        self,
        method: str,
        url: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        """Send one request; return the decoded JSON body (None when there is none)."""
        headers = {"Accept": "application/json", "Content-Type": content_type}
        data = self._send(method, url, headers, query, body)
        try:
            return json.loads(data) if data else None
        except (ValueError, RecursionError) as e:  # e.g. a 5,000-digit number in an object
            raise ClusterError(
                f"{method} {url}: the API server's answer cannot be read: {e}"
            ) from e

    def text(self, url: str, query: Mapping[str, str] | None = None) -> str:
        """GET a plain-text answer (a container log); undecodable bytes become U+FFFD."""
        data = self._send("GET", url, {"Accept": "text/plain, */*"}, query, None)
        return data.decode("utf-8", "replace")

    def logs(self, namespace: str, pod: str, container: str, tail: LogTail | None = None) -> str:
        """The end of one container's log (`pods/log`), as bounded as `tail` says."""
        tail = tail or LogTail()
        query = {
            "container": container,
            "tailLines": str(tail.lines),
            "limitBytes": str(tail.limit_bytes),
            "previous": "true" if tail.previous else "false",
        }
        return self.text(path("pods", pod, namespace) + "/log", query)

    def _send(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        query: Mapping[str, str] | None,
        body: Any,
    ) -> bytes:
        retry = method == "GET"
        while True:
            started = time.monotonic()
            try:
                response = self._call(method, url, headers, query, body)
            except ApiException as e:
                if e.status:  # kubernetes < 37 raises for every status outside 2xx
                    if retry and e.status in _RETRY_STATUSES:
                        retry = False
                        time.sleep(RETRY_PAUSE)
                        continue
                    raise _from_status(e.status, e.reason, e.body, method, url) from e
                if retry and _retriable(e):  # the REST layer's own failures (TLS, proxy)
                    retry = False
                    time.sleep(RETRY_PAUSE)
                    continue
                raise _unreachable(self, e) from None  # its text may quote the URL
            except HTTPError as e:  # transport: refused, reset, timeout
                if retry and _retriable(e):
                    retry = False
                    time.sleep(RETRY_PAUSE)
                    continue
                raise _unreachable(self, e) from None  # its text may quote the URL
            if retry and response.status in _RETRY_STATUSES:
                retry = False
                time.sleep(_retry_after(response))
                continue
            break
        # -v 4 (debug): each request as it is answered, as kubectl -v 6 shows them (the path
        # only: the server, and what its URL may carry, is never in a log line)
        log.debug("%s %s: %d %s in %.0f ms", method, _shown(url, query), response.status,
                  response.reason, 1000 * (time.monotonic() - started))  # fmt: skip
        if not 200 <= response.status <= 299:
            raise _from_status(response.status, response.reason, response.data, method, url)
        return response.data

    def _call(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        query: Mapping[str, str] | None,
        body: Any,
    ) -> _Answer:
        params = list(query.items()) if query else None
        timeouts = (self.connect_timeout, self.timeout)
        watch = _Watch(time.monotonic() + self.deadline)
        _WATCHING.current = watch  # the connection cuts a status line or headers that drip
        try:
            if hasattr(self.client, "param_serialize"):  # kubernetes >= 37
                request = self.client.param_serialize(
                    method, url, query_params=params, header_params=headers, body=body,
                    auth_settings=["BearerToken"],
                )  # fmt: skip
                raw = self.client.call_api(*request, _request_timeout=timeouts).response
            else:  # kubernetes 30-36 (what the krew archive vendors): raw urllib3 response
                raw = self.client.call_api(
                    url, method, query_params=params, header_params=headers, body=body,
                    auth_settings=["BearerToken"], _preload_content=False,
                    _return_http_data_only=True, _request_timeout=timeouts,
                )  # fmt: skip
        except (HTTPError, ApiException):
            if watch.expired:
                raise self._too_slow(method, url, query, 0) from None
            raise
        finally:
            _WATCHING.current = None
        try:
            data = _body(raw, watch.at, self.max_answer)
        except _TooSlow as e:
            raise self._too_slow(method, url, query, e.args[0]) from None
        except _TooLarge:
            raise ClusterError(
                f"{method} {_shown(url, query)}: the API server's answer is larger than "
                f"{self.max_answer // (1024 * 1024)} MiB; it is refused rather than held "
                "in memory",
                hint="a list this large is unusual: check what the server returns "
                f"(kubectl get --raw '{url}?limit=1')",
            ) from None
        finally:
            raw.release_conn()
        if watch.expired:  # cut mid-headers, the answer can look whole (and empty)
            raise self._too_slow(method, url, query, len(data))
        return _Answer(raw.status, str(raw.reason or ""), raw.headers, data)

    def _too_slow(
        self, method: str, url: str, query: Mapping[str, str] | None, came: int
    ) -> ClusterError:
        return ClusterError(
            f"{method} {_shown(url, query)}: the API server at {self.server} did not finish "
            f"its answer within {self.deadline:g}s ({came} bytes of its body came)",
            hint="the server or the network to it is overloaded; try again later",
        )

    def _stream(
        self,
        url: str,
        headers: dict[str, str],
        query: Mapping[str, str],
        idle: float,
    ) -> Any:
        """A watch: urllib3's response with its body left unread, to be read as events come;
        `idle` is the read timeout (a watch has no deadline for its whole answer)."""
        params = list(query.items())
        timeouts = (self.connect_timeout, idle)
        if hasattr(self.client, "param_serialize"):  # kubernetes >= 37
            request = self.client.param_serialize(
                "GET", url, query_params=params, header_params=headers,
                auth_settings=["BearerToken"],
            )  # fmt: skip
            return self.client.call_api(*request, _request_timeout=timeouts).response
        # kubernetes 30-36 (what the krew archive vendors): raw urllib3 response
        return self.client.call_api(
            url, "GET", query_params=params, header_params=headers,
            auth_settings=["BearerToken"], _preload_content=False,
            _return_http_data_only=True, _request_timeout=timeouts,
        )  # fmt: skip

    def get(self, url: str) -> Json:
        """GET one object."""
        result: Json = self.request("GET", url)
        return result

    def list(
        self,
        url: str,
        *,
        label_selector: str = "",
        field_selector: str = "",
        page_size: int = PAGE_SIZE,
    ) -> Iterator[Json]:
        """Every item of a collection, read page by page (`limit`/`continue`)."""
        query = {"limit": str(page_size)}
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        while True:
            page = self.request("GET", url, query=query)
            wrong = _not_a_list(page)
            if wrong:
                raise ClusterError(
                    f"GET {_shown(url, query)}: the API server's answer is not a list of "
                    f"objects ({wrong})",
                    hint="is --kubeconfig pointing at a Kubernetes API server? "
                    "(kubectl get --raw /version)",
                )
            yield from page.get("items") or []
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return
            query["continue"] = token

    def watch(
        self,
        url: str,
        *,
        field_selector: str = "",
        resource_version: str = "",
        seconds: int = 300,
        idle: float = WATCH_IDLE,
    ) -> Iterator[Json]:
        """The events (`{"type", "object"}`, BOOKMARKs included) of one watch from
        `resource_version`, until the server ends it after `seconds`. The server sends a
        bookmark about every minute, so `idle` seconds of silence mean a dead connection:
        a `ClusterError`, as is every other failure; an `ERROR` event is yielded as sent
        (410 Gone: the version is too old, list again). No retry here: the watcher decides."""
        query = {"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": str(seconds)}
        if field_selector:
            query["fieldSelector"] = field_selector
        if resource_version:
            query["resourceVersion"] = resource_version
        headers = {"Accept": "application/json"}
        try:
            response = self._stream(url, headers, query, idle)
        except ApiException as e:
            if e.status:
                raise _from_status(e.status, e.reason, e.body, "GET", url) from e
            raise _unreachable(self, e) from None  # its text may quote the URL
        except HTTPError as e:
            raise _unreachable(self, e) from None  # its text may quote the URL
        try:
            if not 200 <= response.status <= 299:
                raise _from_status(response.status, response.reason, response.data, "GET", url)
            yield from _events(response, f"GET {url}")
        except HTTPError as e:  # the connection dropped or went silent
            raise _unreachable(self, e) from None  # its text may quote the URL
        finally:  # a stream read part way cannot go back into the pool: close it first
            response.close()
            response.release_conn()

    def create(self, url: str, body: Json, *, dry_run: bool = False) -> Json:
        """POST a new object into a collection (`dry_run`: validated by the server, not kept)."""
        result: Json = self.request("POST", url, body=body, query=_dry(dry_run))
        return result

    def replace(self, url: str, body: Json, *, dry_run: bool = False) -> Json:
        """PUT an object; 409 (a `ClusterError` with status 409) when it changed meanwhile."""
        result: Json = self.request("PUT", url, body=body, query=_dry(dry_run))
        return result

    def patch(self, url: str, body: Any, kind: str = "merge", *, dry_run: bool = False) -> Json:
        """PATCH an object with a merge, JSON or strategic-merge patch."""
        result: Json = self.request(
            "PATCH", url, body=body, content_type=_PATCH_TYPES[kind], query=_dry(dry_run)
        )
        return result

    def delete(self, url: str, *, dry_run: bool = False) -> None:
        """DELETE an object."""
        self.request("DELETE", url, query=_dry(dry_run))

    def evict(self, namespace: str, pod: str, *, dry_run: bool = False) -> None:
        """Evict a pod through `pods/eviction` (policy/v1), which honours its
        PodDisruptionBudget: a ClusterError with status 429 when the budget forbids it now."""
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod, "namespace": namespace},
        }
        self.request("POST", path("pods", pod, namespace) + "/eviction", body=body,
                     query=_dry(dry_run))  # fmt: skip


def _events(response: Any, what: str) -> Iterator[Json]:
    """Decode a watch stream: one JSON object per line, as chunks arrive."""
    chunks = response.read_chunked() if response.chunked else response.stream(64 * 1024)
    pending = b""
    for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except (ValueError, RecursionError) as e:
                raise ClusterError(f"{what}: a watch event cannot be read: {e}") from e
            if isinstance(event, dict):
                yield event


def served_versions(api: Api, group: str) -> list[str]:
    """The versions the server serves of an API group, its preferred one first; [] when it
    serves none (an older server, or the group's feature is off)."""
    try:
        found = api.get(f"/apis/{quote(group, safe='')}")
    except ClusterError as e:
        if e.status == 404:
            return []
        raise
    versions = [str(v.get("version")) for v in found.get("versions") or [] if v.get("version")]
    preferred = str((found.get("preferredVersion") or {}).get("version") or "")
    return sorted(versions, key=lambda v: v != preferred)


def _dry(dry_run: bool) -> dict[str, str] | None:
    """The query of a server-side dry run: every stage runs, nothing is persisted."""
    return {"dryRun": "All"} if dry_run else None


def connect(
    kubeconfig: str | None = None,
    context: str | None = None,
    timeout: float = READ_TIMEOUT,
    *,
    user_agent: str = "",
) -> Api:
    """Connect as kubectl would: --kubeconfig, else $KUBECONFIG, else ~/.kube/config;
    inside a pod with none of those, the pod's service account. `user_agent` names the caller
    in the server's audit log (5,000 agents share one service account: the node tells them
    apart)."""
    configuration = client.Configuration()
    try:
        loaded = _load(configuration, kubeconfig, context)
    except ConfigException as e:
        raise ClusterError(
            f"cannot load the cluster configuration: {e}",
            hint="pass --kubeconfig and --context, or check `kubectl config current-context`",
        ) from e
    except (yaml.YAMLError, OSError, ValueError, LookupError, TypeError, AttributeError) as e:
        # the client's loader reads whatever the file holds: broken YAML, a list where a
        # mapping belongs, bytes that are not UTF-8 all reach here as Python errors
        raise ClusterError(
            f"cannot read the kubeconfig {_kubeconfig_name(kubeconfig)}: {_config_problem(e)}",
            hint="check it with `kubectl config view`; pass another with --kubeconfig",
        ) from None
    configuration.retries = 0  # urllib3 retries nothing: `Api._send` holds the one policy
    api_client = client.ApiClient(configuration)
    _pools(api_client.rest_client.pool_manager)
    if user_agent:
        api_client.user_agent = user_agent
    name, namespace = loaded
    host = str(configuration.host)
    return Api(api_client, name, redacted(host), timeout, namespace, secrets=_url_secrets(host))


def redacted(url: str) -> str:
    """A server URL as it may be printed: no `user:password@`, no query or fragment (a
    kubeconfig may carry a token in either; kubectl prints neither)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(a server URL that cannot be read)"
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _url_secrets(url: str) -> tuple[str, ...]:
    """The parts of a server URL that may hold a credential: userinfo, query, fragment."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return (url,)
    userinfo = parts.netloc.rpartition("@")[0]
    return tuple(p for p in (userinfo, parts.query, parts.fragment) if p)


def _scrubbed(text: str, secrets: tuple[str, ...]) -> str:
    """`text` (a transport error, which may quote the URL it used) without the credentials."""
    for secret in secrets:
        text = text.replace(secret, "…")
    return text


def _not_a_list(page: Any) -> str:
    """What a list answer holds instead of a list of objects, in a few words ("" when fine)."""
    if not isinstance(page, dict):
        return f"a JSON {_json_type(page)}"
    if not isinstance(page.get("metadata") or {}, dict):
        return f"metadata is a JSON {_json_type(page['metadata'])}"
    items = page.get("items") or []
    if not isinstance(items, list):
        return f"items is a JSON {_json_type(items)}"
    wrong = [i for i in items if not isinstance(i, dict)]
    return f"an item is a JSON {_json_type(wrong[0])}" if wrong else ""


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number"}
    return "null" if value is None else names.get(type(value), "number")


def _shown(url: str, query: Mapping[str, str] | None) -> str:
    """A request as messages name it: the path, with the continue token left out."""
    return url + (f"?limit={query['limit']}" if query and "limit" in query else "")


_SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def _load(configuration: Any, kubeconfig: str | None, context: str | None) -> tuple[str, str]:
    """Load the credentials; return the context's name and its namespace ("default" unset)."""
    import os

    # The client reads $KUBECONFIG once, at import; read it now, as kubectl does.
    kubeconfig = kubeconfig or os.environ.get("KUBECONFIG") or None
    try:
        config.load_kube_config(
            config_file=kubeconfig, context=context, client_configuration=configuration
        )
    except ConfigException:
        if kubeconfig or context or not _in_cluster():
            raise
        config.load_incluster_config(client_configuration=configuration)
        return "in-cluster", _pod_namespace()
    contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
    chosen = next((c for c in contexts if c.get("name") == context), active) if context else active
    namespace = str((chosen.get("context") or {}).get("namespace") or "default")
    return str(chosen.get("name", "")), namespace


def _kubeconfig_name(kubeconfig: str | None) -> str:
    """The file(s) the client read, as kubectl would: --kubeconfig, $KUBECONFIG, the default."""
    import os

    return kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")


def _config_problem(e: Exception) -> str:
    if isinstance(e, yaml.MarkedYAMLError) and e.problem_mark is not None:
        return f"line {e.problem_mark.line + 1}: not valid YAML ({e.problem})"
    if isinstance(e, yaml.YAMLError):
        return "not valid YAML"
    if isinstance(e, UnicodeDecodeError):
        return f"not UTF-8 text (byte {e.start})"
    if isinstance(e, OSError):
        return e.strerror or str(e)
    return f"not a kubeconfig (apiVersion: v1, kind: Config, clusters, contexts, users): {e}"


def _pod_namespace() -> str:
    try:
        with open(_SERVICE_ACCOUNT_NAMESPACE) as handle:
            return handle.read(256).strip() or "default"
    except OSError:
        return "default"


def _in_cluster() -> bool:
    import os

    return "KUBERNETES_SERVICE_HOST" in os.environ


def _retriable(e: Exception) -> bool:
    """A failure to connect (refused, reset, connect timeout), not one while waiting to read."""
    return not isinstance(e, ReadTimeoutError) and not isinstance(
        getattr(e, "reason", None), ReadTimeoutError
    )


def _retry_after(response: Any) -> float:
    """The server's Retry-After (seconds), bounded; RETRY_PAUSE without one."""
    headers = getattr(response, "headers", None) or {}
    try:
        return min(MAX_RETRY_PAUSE, max(0.0, float(headers.get("Retry-After", RETRY_PAUSE))))
    except (TypeError, ValueError):
        return RETRY_PAUSE


def _unreachable(api: Api, e: Exception) -> ClusterError:
    reason = _scrubbed(str(getattr(e, "reason", None) or e), api.secrets)
    return ClusterError(
        f"cannot reach the API server at {api.server} (context {api.context!r}): {reason}",
        hint="check that the cluster is up and that --kubeconfig/--context point at it "
        "(kubectl cluster-info)",
    )


_FORBIDDEN = re.compile(
    r'cannot (?P<verb>\w+) resource "(?P<resource>[^"]+)" in API group "(?P<group>[^"]*)"'
)


def _from_status(status: int, reason: str, body: Any, method: str, url: str) -> ClusterError:
    message, status_reason = _status_message(body)
    if status == 401:
        return ClusterError(
            "the API server rejected the credentials (401 Unauthorized)",
            hint="refresh your login for this context (kubectl config view --minify)",
            status=status,
        )
    if status == 403:
        return ClusterError(
            message or f"forbidden: {method} {url}", status=status, hint=_forbidden_hint(message)
        )
    text = message or f"{method} {url} failed"
    return ClusterError(f"{text} ({status} {status_reason or reason})", status=status)


def _forbidden_hint(message: str) -> str:
    found = _FORBIDDEN.search(message)
    if not found:
        return "ask a cluster admin for the permission named above"
    group = found["group"] or "core"
    return (
        f"ask a cluster admin to grant '{found['verb']}' on '{found['resource']}' "
        f"(API group {group}), e.g. with a Role or ClusterRole bound to you"
    )


def _status_message(body: Any) -> tuple[str, str]:
    """Message and reason from a `kind: Status` body; other bodies are cut short."""
    if not body:
        return "", ""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    try:
        status = json.loads(text)
    except ValueError:
        return text[:_MAX_BODY_IN_MESSAGE], ""
    if isinstance(status, dict) and status.get("kind") == "Status":
        message, reason = str(status.get("message", "")), str(status.get("reason", ""))
        if reason == "TooManyRequests":  # an eviction refused: the causes name the budget
            causes = (status.get("details") or {}).get("causes") or []
            said = [
                str(c.get("message")) for c in causes if isinstance(c, dict) and c.get("message")
            ]
            message = " ".join([message, *said])
        return message, reason
    return text[:_MAX_BODY_IN_MESSAGE], ""
