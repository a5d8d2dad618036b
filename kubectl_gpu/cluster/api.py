"""Raw JSON requests to one API server: reads page by page, watches, writes, retries.

Owns the `Api` a command or the agent holds: the retry policy (a read tried once more),
decoding answers as plain JSON (about ten times faster than the generated `V1…` models on
large lists, docs/architecture.md, "Ports"; and any resource works the same way), and the shape
checks of a list page. Must not decide anything about GPUs.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from kubectl_gpu.cluster import shapes
from kubectl_gpu.cluster.failures import (
    AnswerTooLarge,
    from_status,
    retriable,
    retry_after,
    unreachable,
    whole,
)
from kubectl_gpu.cluster.resources import path
from kubectl_gpu.cluster.transport import (
    ANSWER_DEADLINE,
    CONNECT_TIMEOUT,
    MAX_ANSWER_BYTES,
    READ_TIMEOUT,
    RETRY_PAUSE,
    RETRY_STATUSES,
    WATCH_IDLE,
    WATCHING,
    Answer,
    Deadline,
    TooLarge,
    TooSlow,
    raw_response,
    read_body,
)
from kubectl_gpu.errors import ClusterError

log = logging.getLogger("kubectl_gpu.cluster")  # the name -v's log lines have always had
Json = dict[str, Any]
PAGE_SIZE = 500
# A page of a list is read whole, then decoded: its Python objects take about ten times its
# bytes, so a page is held to MAX_PAGE_BYTES (about 160 MiB decoded, under the 400 MiB budget
# of docs/architecture.md). A page of PAGE_SIZE items past it is asked again as SMALL_PAGE
# items (objects can be large: a node with many images); a page of SMALL_PAGE items past it
# means the server ignores `limit`, and the list is refused naming its size.
MAX_PAGE_BYTES = 16 * 1024 * 1024
SMALL_PAGE = 50
MAX_THROTTLED = 5  # 429 answers to one request before its failure is the caller's
_PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}


@dataclasses.dataclass(frozen=True)
class LogTail:
    """How much of a container log to read: the last `lines`, at most `limit_bytes`, of the
    current instance or (`previous`) the one before the last restart."""

    lines: int = 50
    limit_bytes: int = 64 * 1024
    previous: bool = False


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
    max_page: int = MAX_PAGE_BYTES  # one page of a list (`list`): see MAX_PAGE_BYTES
    retry_reads: bool = True  # False where the caller has a deadline of its own (top's nodes)
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
        """Send one request; return the decoded JSON body (None when there is none). An
        answer over `max_answer` bytes raises `AnswerTooLarge`."""
        data = self._send(method, url, _json_headers(content_type), query, body)
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
        retry = method == "GET" and self.retry_reads
        throttled = 0
        while True:
            started = time.monotonic()
            try:
                response = self._call(method, url, headers, query, body)
            except ApiException as e:
                if e.status:  # kubernetes < 37 raises for every status outside 2xx
                    if retry and e.status in RETRY_STATUSES:
                        retry = False
                        time.sleep(RETRY_PAUSE)
                        continue
                    raise from_status(e.status, e.reason, e.body, method, url) from e
                if retry and retriable(e):  # the REST layer's own failures (TLS, proxy)
                    retry = False
                    time.sleep(RETRY_PAUSE)
                    continue
                raise self._unreachable(e) from None  # its text may quote the URL
            except HTTPError as e:  # transport: refused, reset, timeout
                if retry and retriable(e):
                    retry = False
                    time.sleep(RETRY_PAUSE)
                    continue
                raise self._unreachable(e) from None  # its text may quote the URL
            # Too Many Requests is the API server's flow control turning the request away
            # before it ran, so even a write is safe to send again, after its Retry-After
            throttled += response.status == 429
            again = response.status == 429 and throttled <= MAX_THROTTLED
            if response.status in RETRY_STATUSES and (retry or again):
                retry = False
                time.sleep(retry_after(response))
                continue
            break
        # -v 4 (debug): each request as it is answered, as kubectl -v 6 shows them (the path
        # only: the server, and what its URL may carry, is never in a log line)
        log.debug("%s %s: %d %s in %.0f ms", method, _shown(url, query), response.status,
                  response.reason, 1000 * (time.monotonic() - started))  # fmt: skip
        if not 200 <= response.status <= 299:
            raise from_status(response.status, response.reason, response.data, method, url)
        return response.data

    def _call(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        query: Mapping[str, str] | None,
        body: Any,
    ) -> Answer:
        timeouts = (self.connect_timeout, self.timeout)
        watch = Deadline(time.monotonic() + self.deadline)
        WATCHING.current = watch  # the connection cuts a status line or headers that drip
        try:
            raw = raw_response(self.client, method, url, headers=headers, query=query, body=body,
                               timeouts=timeouts)  # fmt: skip
        except (HTTPError, ApiException):
            # cut at the deadline, or the socket's own read timeout fired first (it may, when
            # the timeout is the deadline and the cutting thread runs late on a busy machine):
            # either way the server did not answer in time, which is not being unreachable
            if watch.expired or time.monotonic() >= watch.at:
                raise self._too_slow(method, url, query, 0) from None
            raise
        finally:
            WATCHING.current = None
        try:
            data = read_body(raw, watch.at, self.max_answer)
        except TooSlow as e:
            raise self._too_slow(method, url, query, e.args[0]) from None
        except TooLarge:
            declared = whole(raw.headers.get("Content-Length") if raw.headers else None)
            size = f" ({declared / 1e6:.1f} MB)" if declared else ""
            raise AnswerTooLarge(
                f"{method} {_shown(url, query)}: the API server's answer{size} is larger than "
                f"{self.max_answer // (1024 * 1024)} MiB; it is refused rather than held in "
                "memory",
                hint="a list this large is unusual: check what the server returns "
                f"(kubectl get --raw '{url}?limit=1')",
                declared=declared,
            ) from None
        finally:
            raw.release_conn()
        if watch.expired:  # cut mid-headers, the answer can look whole (and empty)
            raise self._too_slow(method, url, query, len(data))
        return Answer(raw.status, str(raw.reason or ""), raw.headers, data)

    def _unpaged(self, url: str, query: Mapping[str, str], e: AnswerTooLarge) -> ClusterError:
        """A page of `limit` items larger than a page may be: the server (or something in
        front of it) ignores `limit`, so the whole list would be one answer."""
        size = f" ({e.declared / 1e6:.1f} MB)" if e.declared else ""
        bound = min(self.max_answer, self.max_page) // 2**20
        return ClusterError(
            f"GET {_shown(url, query)}: a page of at most {query['limit']} items from the API "
            f"server at {self.server} is larger than {bound} MiB{size}, the most a page may "
            "hold: the server does not page this list (it ignores `limit`), and the whole list "
            "is refused rather than held in memory (about ten times its size once read)",
            hint="is something between you and the API server dropping `limit`? `kubectl get "
            f"--raw '{url}?limit=1'` should answer one item and a `continue` token",
        )

    def _too_slow(
        self, method: str, url: str, query: Mapping[str, str] | None, came: int
    ) -> ClusterError:
        return ClusterError(
            f"{method} {_shown(url, query)}: the API server at {self.server} did not finish "
            f"its answer within {self.deadline:g}s ({came} bytes of its body came)",
            hint="the server or the network to it is overloaded; try again later",
        )

    def _unreachable(self, e: Exception) -> ClusterError:
        return unreachable(self.server, self.context, self.secrets, e)

    def get(self, url: str) -> Json:
        """GET one object; a field of the wrong JSON type is a `ClusterError` naming it."""
        result: Json = self.request("GET", url)
        shapes.check(url.rstrip("/").split("/")[-2:-1], result, url)
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
        pager = dataclasses.replace(self, max_answer=min(self.max_answer, self.max_page))
        while True:
            try:
                page = pager.request("GET", url, query=query)
            except AnswerTooLarge as e:
                if int(query["limit"]) > SMALL_PAGE:  # large objects: smaller pages
                    query["limit"] = str(SMALL_PAGE)
                    continue
                raise self._unpaged(url, query, e) from None
            wrong = shapes.not_a_list(page)
            if wrong:
                raise ClusterError(
                    f"GET {_shown(url, query)}: the API server's answer is not a list of "
                    f"objects ({wrong})",
                    hint="is --kubeconfig pointing at a Kubernetes API server? "
                    "(kubectl get --raw /version)",
                )
            items = page.get("items") or []
            resource = url.rstrip("/").split("/")[-1:]
            for index, item in enumerate(items):
                shapes.check(resource, item, url, index)
            yield from items
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
        timeouts = (self.connect_timeout, idle)  # a watch has no deadline for its whole answer
        try:
            response = raw_response(self.client, "GET", url, headers=headers, query=query,
                                    body=None, timeouts=timeouts)  # fmt: skip
        except ApiException as e:
            if e.status:
                raise from_status(e.status, e.reason, e.body, "GET", url) from e
            raise self._unreachable(e) from None  # its text may quote the URL
        except HTTPError as e:
            raise self._unreachable(e) from None  # its text may quote the URL
        try:
            if not 200 <= response.status <= 299:
                raise from_status(response.status, response.reason, response.data, "GET", url)
            yield from _events(response, f"GET {url}")
        except HTTPError as e:  # the connection dropped or went silent
            raise self._unreachable(e) from None  # its text may quote the URL
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
        """DELETE an object. Its answer (the object as deleted) is not decoded: nobody reads
        it, and a 1,000-node `share` deletes 2,000 pods."""
        self._send("DELETE", url, _json_headers(), _dry(dry_run), None)

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


def _json_headers(content_type: str = "application/json") -> dict[str, str]:
    return {"Accept": "application/json", "Content-Type": content_type}


def _dry(dry_run: bool) -> dict[str, str] | None:
    """The query of a server-side dry run: every stage runs, nothing is persisted."""
    return {"dryRun": "All"} if dry_run else None


def _shown(url: str, query: Mapping[str, str] | None) -> str:
    """A request as messages name it: the path, with the continue token left out."""
    return url + (f"?limit={query['limit']}" if query and "limit" in query else "")
