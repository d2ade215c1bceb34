"""One asynchronous Kubernetes REST client for both components (plain JSON).

Requests carry dicts as they are: a typed client's models would re-serialise what they touch
(timestamps, unknown fields) and make an unchanged object look changed.

`ClusterApi` talks to one cluster with the credentials of an `annex.kube.Connection` (CA, client
certificate, bearer token, tls-server-name), waits for the client-side rate limiter (writes
always; reads when the component asks for it, as client-go throttles every request), and raises
`annex.api_errors.ApiError` (carrying the apiserver's Status) for any non-2xx answer. It does not
retry: callers decide (`annex.retries.retrying` for what must re-read, a controller's backoff);
but a request answered 401 while the token source has a newer token is sent once more with it,
as client-go does. Requests carry the component's User-Agent, and writes its name as fieldManager
(`annex.kube.name_component`).

Requests go through `annex.http1`: answered-at-once ones on its keep-alive connections, each
watch on a connection of its own. They are opened lazily on the event loop of the first request
and belong to it: a component running several loops builds one client per loop.

Every request is counted and timed (`annex.request_metrics`, process-wide unless a client is
given its own counter). Paths are made by `annex.api_paths`.
"""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote, urlsplit

import orjson

from annex import tracing
from annex.api_errors import ApiError, WatchExpired
from annex.api_paths import with_query
from annex.http1 import ConnectionPool, Response, Stream
from annex.kube import (
    Connection,
    LiveConnection,
    RateLimiter,
    component_name,
    current_token,
    user_agent,
)
from annex.request_metrics import REQUESTS, RequestMetrics

log = logging.getLogger(__name__)

JSON = "application/json"
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
"""What a list asks for to get its objects' metadata only (client-go's metadata client)."""
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
REQUEST_TIMEOUT = 30.0
"""Seconds a request may take in all (client-go's rest.Config Timeout)."""
MAX_RETRIES = 10
"""Times a request is sent again when the server answers with Retry-After (client-go's
default): with client-side throttling off, the API server's Priority and Fairness slows a
client down this way (429)."""
WRITES = frozenset({"POST", "PUT", "PATCH"})
"""The methods whose requests carry a fieldManager (create, update, patch)."""
_PATH_SAFE = "/?%:@!$&'()*+,;=-._~"
"""What a path keeps as it is (RFC 3986's pchar, "/" and "?", and escapes already made), as
aiohttp (yarl) sent it."""
_PATH_AS_IT_IS = re.compile(r"[A-Za-z0-9._~/-]*").fullmatch
"""A path that `quote` would leave as it is (the paths `group_path` makes of DNS names)."""
_ACCEPT_JSON = b"Accept: application/json\r\n"
_ACCEPT_GZIP = b"Accept-Encoding: gzip\r\n"
"""What answers at once accept, as Go's transport: the API server compresses those over 128 KiB
(lists). Not a watch: asked without it, no server compresses the stream, read line by line as
it comes."""


def ssl_context(connection: Connection) -> ssl.SSLContext | bool:
    """TLS as the kubeconfig says; False for plain-HTTP servers (aiohttp: no TLS checks)."""
    if not connection.server.startswith("https:"):
        return False
    context = ssl.create_default_context(cafile=connection.ca_path)
    if connection.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if connection.certificate_path:
        context.load_cert_chain(connection.certificate_path, connection.private_key_path)
    return context


class ClusterApi:
    """One cluster, on one event loop.

    Given a `LiveConnection`, it follows it: once the credentials are replaced, new requests
    use them, and watches in progress end (their callers watch again from the version they
    reached, with the new credentials; an API server checks a watch's credentials only when it
    starts). Requests in progress finish with the old ones."""

    def __init__(self, connection: Connection | LiveConnection, *, throttle_reads: bool = True,
                 timeout: float = REQUEST_TIMEOUT, limiter: RateLimiter | None = None,
                 metrics: RequestMetrics | None = None, component: str | None = None) -> None:
        self.live = connection if isinstance(connection, LiveConnection) else LiveConnection(
            connection)
        self._throttle_reads = throttle_reads
        self._timeout = timeout
        self._limiter = limiter or RateLimiter(self.live.current.limits)
        self.metrics = metrics or REQUESTS
        self._component = component or component_name()
        """The fieldManager of the writes, and the User-Agent's first word."""
        self._pool: ConnectionPool | None = None
        """The connections to the server, with the credentials they were opened with."""
        self._head = b""
        """The headers every request carries (host, user agent), but the credentials
        (`_authorization`), Accept and Accept-Encoding (`_ACCEPT_GZIP`)."""
        self._token: str | None = None
        self._authorization = b""
        """The Authorization header of `_token`."""
        self._prefix = ""
        """The server URL's path (a proxy's, e.g. Rancher's /k8s/clusters/ID), before paths."""
        self._pool_connection: Connection | None = None
        self._host = ""
        """The pool's server as host:port, as the request metrics name it."""
        self._streams: set[Stream] = set()
        """The current pool's watches, closed when the credentials change."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self.live.subscribe(self._credentials_changed)
        if tracing.enabled():  # decided once: untraced, `request` is the method itself
            self.request = tracing.traced_request(  # type: ignore[method-assign]
                self.request, lambda: self._host)

    @property
    def connection(self) -> Connection:
        return self.live.current

    def _credentials_changed(self) -> None:
        """Called on the replacing thread: move over on this client's own loop."""
        loop = self._loop
        if loop is None:
            return  # nothing opened yet: the first request opens with the new credentials
        try:
            loop.call_soon_threadsafe(self._follow)
        except RuntimeError:
            pass  # the loop has closed: so have the connections

    def _follow(self) -> None:
        if self._pool is not None and self.live.current is not self._pool_connection:
            self._retire()

    def _retire(self) -> None:
        """Stop using the connections: watches end now, requests in progress may finish."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        streams, self._streams = self._streams, set()
        for stream in streams:
            stream.close()

    def _open(self) -> ConnectionPool:
        loop = asyncio.get_running_loop()
        if self._pool is not None and loop is not self._loop:
            raise RuntimeError("a ClusterApi serves the event loop that first used it; "
                               "build one client per loop")
        connection = self.live.current
        if self._pool is not None and connection is not self._pool_connection:
            self._retire()
        if self._pool is None:
            tls = ssl_context(connection)
            server = urlsplit(connection.server)
            headers = {"Host": server.netloc, "User-Agent": user_agent(self._component)}
            self._pool = ConnectionPool(
                server.hostname or "", server.port or (443 if server.scheme == "https" else 80),
                tls=tls if isinstance(tls, ssl.SSLContext) else None,
                server_hostname=connection.tls_server_name or server.hostname,
                limit=connection.limits.burst, proxy=connection.proxy)
            self._head = "".join(f"{name}: {value}\r\n"
                                 for name, value in headers.items()).encode("latin-1")
            self._prefix = server.path.rstrip("/")
            self._pool_connection = connection
            self._host = server.netloc
            self._loop = loop
        self._use_token(current_token(connection))
        return self._pool

    def _use_token(self, token: str | None) -> None:
        if token != self._token:
            self._token = token
            self._authorization = (b"Authorization: Bearer %s\r\n" % token.encode("latin-1")
                                   if token else b"")

    async def _renew_token(self) -> None:
        """Read the token again when its source says it is due (off the loop: a file read, an
        exec plugin run)."""
        source = self.live.current.token_source
        if source is not None and source.stale():
            await asyncio.to_thread(source.renew_if_stale)

    async def _reauthenticate(self, rejected: str | None) -> bool:
        """After a 401 for `rejected`: whether the token source now gives another token."""
        source = self.live.current.token_source
        if source is None:
            return False
        token = await asyncio.to_thread(source.refresh, rejected)
        if token is None or token == rejected:
            return False
        log.info("the API server refused the bearer token (401): using the one %s gives now",
                 source)
        return True

    def _target(self, path: str, query: dict[str, Any] | None) -> bytes:
        """The request line's target: the server's path prefix, `path` escaped, `query`."""
        target = self._prefix + path
        if not _PATH_AS_IT_IS(target):
            target = quote(target, safe=_PATH_SAFE)
        return with_query(target, query).encode()

    async def request(self, method: str, path: str, body: Any = None, *,
                      content_type: str = JSON, query: dict[str, Any] | None = None,
                      timeout: float | None = None, accept: str = JSON) -> Any:
        """The decoded JSON answer (None when empty); ApiError for any non-2xx answer. `accept`:
        the form asked for (`METADATA_LIST`: a list's metadata only). An
        answer that asks to be tried again (Retry-After on 429 or 5xx) is, after that long, up
        to MAX_RETRIES times, as client-go does; one answered 401 once more if the token source
        gives a new token."""
        if method in WRITES and "fieldManager" not in (query or {}):
            query = {**(query or {}), "fieldManager": self._component}
        reauthenticated = False
        for attempt in range(MAX_RETRIES + 1):
            await self._renew_token()
            pool = self._open()
            sent = self._token
            try:
                return await self._send(pool, method, path, body, content_type, query, timeout,
                                        accept)
            except ApiError as error:
                if error.status == 401 and not reauthenticated:
                    reauthenticated = True
                    if await self._reauthenticate(sent):
                        continue
                if error.retry_after is None or attempt == MAX_RETRIES:
                    raise
                log.debug("%s %s: %s; again in %.0f s", method, path, error, error.retry_after)
                await asyncio.sleep(error.retry_after)
        raise AssertionError("unreachable")

    async def _send(self, pool: ConnectionPool, method: str, path: str, body: Any,
                    content_type: str, query: dict[str, Any] | None, timeout: float | None,
                    accept: str) -> Any:
        started = time.monotonic()  # the client-side throttling included, as client-go times
        if method != "GET" or self._throttle_reads:
            await self._limiter.acquire()
        target = self._target(path, query)
        head = b"%s %s HTTP/1.1\r\n%s%sAccept: %s\r\n%s" % (
            method.encode(), target, self._head, self._authorization, accept.encode(),
            _ACCEPT_GZIP)
        if body is None:
            request = head + b"\r\n"
        else:
            content = orjson.dumps(body)
            request = b"%sContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s" % (
                head, content_type.encode(), len(content), content)
        code = "<error>"
        try:
            response = await pool.request(request, retry_closed=method == "GET",
                                          timeout=timeout or self._timeout)
            code = str(response.status)
            if not 200 <= response.status < 300:
                raise ApiError(response.status, _status_body(response.body),
                               _retry_after(response))
        finally:
            self.metrics.count(self._host, method, path, code)
            self.metrics.observe(self._host, method, time.monotonic() - started)
        data = response.body
        if not data:
            return None
        try:
            return orjson.loads(data)
        except ValueError:
            return data.decode(errors="replace")

    async def get(self, path: str) -> Any:
        return await self.request("GET", path)

    async def find(self, path: str) -> Any:
        """The object, or None when it does not exist."""
        try:
            return await self.get(path)
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    async def list(self, path: str, label_selector: str = "") -> list[dict[str, Any]]:
        query = {"labelSelector": label_selector} if label_selector else None
        listed = await self.request("GET", path, query=query)
        return list((listed or {}).get("items") or [])

    async def create(self, path: str, body: dict[str, Any]) -> Any:
        return await self.request("POST", path, body)

    async def replace(self, path: str, body: dict[str, Any]) -> Any:
        return await self.request("PUT", path, body)

    async def patch(self, path: str, patch: Any, content_type: str = MERGE_PATCH) -> Any:
        return await self.request("PATCH", path, patch, content_type=content_type)

    async def delete(self, path: str, options: dict[str, Any] | None = None) -> Any:
        return await self.request("DELETE", path, options)

    async def delete_if_exists(self, path: str, options: dict[str, Any] | None = None) -> bool:
        """Delete; False when it was already gone."""
        try:
            await self.delete(path, options)
            return True
        except ApiError as error:
            if error.status == 404:
                return False
            raise

    async def healthy(self, timeout: float) -> None:
        """GET /livez; raises on any failure or non-2xx answer."""
        await self.request("GET", "/livez", timeout=timeout)

    async def watch(self, path: str, resource_version: str, timeout_seconds: int = 300,
                    query: dict[str, str] | None = None) -> AsyncIterator[dict[str, Any]]:
        """The events of one watch request from `resource_version`, bookmarks included;
        WatchExpired when that version is too old (list again). `query` narrows it
        (labelSelector, fieldSelector)."""
        await self._renew_token()
        pool = self._open()
        sent = self._token
        query = {**(query or {}), "watch": "true", "resourceVersion": resource_version,
                 "allowWatchBookmarks": "true", "timeoutSeconds": str(timeout_seconds)}
        request = b"GET %s HTTP/1.1\r\n%s%s%s\r\n" % (
            self._target(path, query), self._head, self._authorization, _ACCEPT_JSON)
        read_timeout = timeout_seconds + 30.0  # the server ends it by then
        counted = False  # once answered (client-go counts a watch when its response comes)
        stream: Stream | None = None
        try:
            stream = await pool.stream(request, timeout=self._timeout)
            self.metrics.count(self._host, "GET", path, str(stream.status), watch=True)
            counted = True
            if stream.status == 410:
                raise WatchExpired()
            if stream.status >= 400:
                status = _status_body(await stream.body(read_timeout))
                if stream.status == 401:  # the caller's next watch uses the new token
                    await self._reauthenticate(sent)
                raise ApiError(stream.status, status)
            if pool is not self._pool:  # retired while it was being opened
                return
            self._streams.add(stream)
            async for lines in stream.lines(read_timeout):
                for line in lines:
                    if not line.strip():
                        continue
                    event = orjson.loads(line)
                    if event.get("type") == "ERROR":
                        status = event.get("object") or {}
                        if status.get("code") == 410:
                            raise WatchExpired()
                        raise ApiError(int(status.get("code") or 500), status)
                    yield event
        finally:
            if stream is not None:
                stream.close()
                self._streams.discard(stream)
            if not counted:
                self.metrics.count(self._host, "GET", path, "<error>", watch=True)

    async def close(self) -> None:
        """Close the connections (on their loop); the client opens new ones if used again."""
        self._retire()
        self._pool_connection, self._loop = None, None


def _retry_after(response: Response) -> float | None:
    """Whole seconds from Retry-After on a 429 or 5xx answer (client-go's checkWait), else None."""
    if response.status != 429 and response.status < 500:
        return None
    try:
        return float(max(0, int(response.headers.get("retry-after", ""))))
    except ValueError:
        return None


def _status_body(data: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(data) if data else {}
    except ValueError:
        return {"message": data.decode(errors="replace")[:500]}
    return body if isinstance(body, dict) else {}


