"""The virtual nodes' kubelet API: what the home API server calls for `kubectl logs`, `exec`,
`attach`, `port-forward` and `top`, served from the twin pods through the remote API server
under the consumer identity.

Each of the agent's Nodes (one, or one per pool of the offer) has a kubelet API of its own, on a
port of its own that its `daemonEndpoints` advertise (`KubeletServer`): authorized, certified and
answering for that node alone, as a kubelet serves exactly its own node.

They run on a thread and event loop of their own, so that long log and exec streams never delay
the agent's reconciles; they read the agent's mirrors (thread-safe) and talk to both clusters
with clients of their own loop, built on the agent's live credentials.

Only pods bound to the node addressed whose ShadowPod this agent owns in an accepted twin
namespace are reachable: anything else (a pod of another of the agent's nodes too) is the 404 a
kubelet gives for a pod it does not run.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

import spdy3
from annex.api_errors import ApiError, error_message
from annex.kube import Connection, LiveConnection, current_token
from annex.kubeapi import ClusterApi, ssl_context
from annex.metrics import Family, ServedRequests
from home_agent.config import AgentConfig
from home_agent.kubelet.auth import Caller, Reviews, certificate_caller
from home_agent.kubelet.certs import load_pair, self_signed
from home_agent.kubelet.csr import ServingCertificates
from home_agent.kubelet.streams import dial, offered_protocols, relay
from home_agent.kubelet.usage import NodePods, Usage, is_bound
from home_agent.kubelet.websocket import bridge, is_websocket, ports_of, remote_protocols
from shared.forge.kubelet import (
    PodRequest,
    authorization_attributes,
    container_names,
    container_not_found,
    forbidden_message,
    parse_pod_path,
    pod_list,
    pod_not_found,
    remote_log_query,
    remote_pod_path,
    remote_stream_query,
    resource_metrics,
    stats_summary,
)
from shared.forge.node_status import Health
from spdy3 import upgrade
from spdy3.aiohttp_upgrade import claim, switch_protocols

log = logging.getLogger(__name__)

HEALTH_POLL = 1.0
"""Seconds between looks at the remote's health while a stream is idle: a stream the cut left
hanging ends once the agent declares the remote unreachable."""
FOLLOW_POLL = 1.0
"""Seconds between looks at the agent's nodes (a node reconcile asking its ports wakes the
kubelet loop at once)."""
CONNECT_TIMEOUT = 10.0
REMOTE_SUBRESOURCES = {"exec": "exec", "attach": "attach", "portForward": "portforward"}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _text(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=message.rstrip("\n") + "\n")


class RemoteSession:
    """An aiohttp session to the remote API server with the consumer's current credentials
    (rebuilt when they are replaced), for the streamed requests ClusterApi does not make."""

    def __init__(self, live: LiveConnection) -> None:
        self.live = live
        self._session: aiohttp.ClientSession | None = None
        self._connection: Connection | None = None
        self._token: str | None = None

    def session(self) -> tuple[aiohttp.ClientSession, Connection]:
        connection = self.live.current
        token = current_token(connection)  # a rotated one: a new session
        if self._session is None or connection is not self._connection or token != self._token:
            old = self._session
            if old is not None:
                # Streams in progress keep the old one until they end; it closes with them.
                asyncio.get_running_loop().call_later(60, lambda: asyncio.ensure_future(
                    old.close()))
            headers = {}
            if token:
                headers["Authorization"] = f"Bearer {token}"
            self._session = aiohttp.ClientSession(
                headers=headers, connector=aiohttp.TCPConnector(ssl=ssl_context(connection)),
                proxy=connection.proxy.url if connection.proxy else None)
            self._connection, self._token = connection, token
        return self._session, connection

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


@dataclass(frozen=True)
class Twin:
    """A home pod of the node addressed and where its twin is."""

    request: PodRequest
    pod: dict[str, Any]
    remote_namespace: str


KUBELET_REQUESTS = (
    Family("annex_kubelet_request_duration_seconds", "histogram",
           "How long the virtual node's kubelet API took to answer, by route (a stream: how "
           "long it stayed open).", ("route",)),
    Family("annex_kubelet_requests_total", "counter",
           "Requests to the virtual node's kubelet API, by route and HTTP status.",
           ("route", "code")),
    Family("annex_kubelet_requests_in_flight", "gauge",
           "Requests the kubelet API is answering, by route: on the exec, attach, portForward "
           "and containerLogs routes, the streams open.", ("route",)),
)


def route_of(request: web.Request) -> str:
    """The route a request matched (its path pattern: few values, not one per pod)."""
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "unmatched"


@dataclass(frozen=True)
class KubeletSources:
    """What the kubelet APIs answer from: the nodes' pods, the agent's nodes (known once
    `listed`) and the remote's health as they are now, the remote's cluster id (its errors name
    it), and both clusters' live credentials (its own clients, on its own loop, are built on
    them)."""

    node_pods: NodePods
    node_names: Callable[[], Collection[str]]
    listed: Callable[[], bool]
    health: Callable[[], Health]
    remote_cluster_id: str
    home: LiveConnection
    remote: LiveConnection


class KubeletApi:
    """The kubelet API of the node `node_name`."""

    def __init__(self, node_name: str, sources: KubeletSources, reviews: Reviews,
                 remote: RemoteSession, client_ca: bool, usage: Usage,
                 served: ServedRequests | None = None) -> None:
        self.node_name = node_name
        self.sources = sources
        self.served = served
        self.reviews = reviews
        self.remote = remote
        self.client_ca = client_ca
        self.usage = usage

    # --- authentication and authorization -----------------------------------------------

    async def _caller(self, request: web.Request) -> Caller | None:
        if self.client_ca and request.transport is not None:
            caller = certificate_caller(request.transport.get_extra_info("peercert"))
            if caller is not None:
                return caller
        header = request.headers.get("Authorization", "")
        if header[:7].lower() == "bearer " and header[7:].strip():
            return await self.reviews.authenticate_token(header[7:].strip())
        return None

    @web.middleware
    async def guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            caller = await self._caller(request)
            if caller is None:
                return _text(401, "Unauthorized")
            attributes = authorization_attributes(request.method, request.path,
                                                  self.node_name)
            if not await self.reviews.authorize(caller, attributes):
                log.info("kubelet API: %s refused %s %s", caller.name, request.method,
                         request.path)
                return _text(403, forbidden_message(caller.name, attributes))
        except (TimeoutError, ApiError, aiohttp.ClientError, OSError) as error:
            # A kubelet answers 500 when its webhook cannot be reached.
            log.warning("kubelet API: cannot review %s %s at home: %s", request.method,
                        request.path, error_message(error))
            return _text(500, f"Authorization error: {error_message(error)}")
        return await handler(request)

    # --- the pods of this node ------------------------------------------------------------

    def twin(self, request: PodRequest) -> Twin:
        """The home pod and its twin namespace, or the kubelet's 404 (for a pod bound to
        another of the agent's nodes too)."""
        pod = self.sources.node_pods.pods.get((request.namespace, request.pod))
        remote_namespace = self.sources.node_pods.twins.accepted(request.namespace)
        if (pod is None or remote_namespace is None or not is_bound(pod, self.node_name)
                or (request.uid and request.uid != (pod.get("metadata") or {}).get("uid"))
                or self.sources.node_pods.shadow_pods.get((remote_namespace, request.pod)) is None):
            raise web.HTTPNotFound(text=pod_not_found(request) + "\n")
        if request.container and request.container not in container_names(pod):
            raise web.HTTPNotFound(text=container_not_found(request) + "\n")
        return Twin(request, pod, remote_namespace)

    def _unreachable(self) -> web.Response | None:
        """The 503 of a remote the agent found unreachable: answered at once, never a hang."""
        health = self.sources.health()
        if health.ready is False:
            return _text(503, f"remote cluster {self.sources.remote_cluster_id} is "
                              f"unreachable: {health.message}")
        return None

    def _remote_failed(self, error: BaseException) -> web.Response:
        return _text(502, f"remote cluster {self.sources.remote_cluster_id}: "
                          f"{error_message(error) or type(error).__name__}")

    # --- handlers ---------------------------------------------------------------------------

    async def healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def pods(self, request: web.Request) -> web.Response:
        return web.json_response(pod_list(self.sources.node_pods.bound(self.node_name)))

    async def stats_summary(self, request: web.Request) -> web.Response:
        usage = await self.usage.collect(self.node_name)
        return web.json_response(stats_summary(self.node_name, self.usage.started,
                                               time.time(), usage))

    async def resource_metrics(self, request: web.Request) -> web.Response:
        usage = await self.usage.collect(self.node_name)
        return web.Response(text=resource_metrics(time.time(), usage),
                            content_type="text/plain")

    async def container_logs(self, request: web.Request) -> web.StreamResponse:
        target = parse_pod_path(request.path)
        if target is None:
            raise web.HTTPNotFound()
        twin = self.twin(target)
        if (refusal := self._unreachable()) is not None:
            return refusal
        session, connection = self.remote.session()
        url = connection.server.rstrip("/") + remote_pod_path(twin.remote_namespace, target.pod,
                                                              "log")
        try:
            upstream = await session.get(
                url, params=remote_log_query(target.container, request.query),
                server_hostname=connection.tls_server_name,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT,
                                              connect=CONNECT_TIMEOUT))
        except (TimeoutError, aiohttp.ClientError, OSError) as error:
            return self._remote_failed(error)
        try:
            if upstream.status >= 400:
                body = await upstream.read()
                return _text(upstream.status, _status_message(body))
            response = web.StreamResponse(
                status=200, headers={"Content-Type": "text/plain"})
            await response.prepare(request)
            await self._copy(upstream, response)
            return response
        finally:
            upstream.release()

    async def _copy(self, upstream: aiohttp.ClientResponse,
                    response: web.StreamResponse) -> None:
        """Until the remote ends the stream, the caller goes away, or the remote is declared
        unreachable (a cut ends the stream cleanly, as a kubelet's log stream ends)."""
        while True:
            try:
                async with asyncio.timeout(HEALTH_POLL):
                    chunk = await upstream.content.readany()
            except TimeoutError:
                if self.sources.health().ready is False:
                    break
                continue
            except (aiohttp.ClientError, OSError):
                break
            if not chunk:
                break
            try:
                await response.write(chunk)
            except (ConnectionError, OSError):
                return
        try:
            await response.write_eof()
        except (ConnectionError, OSError):
            pass

    async def stream_session(self, request: web.Request) -> web.StreamResponse:
        """exec, attach, portForward: the caller's SPDY session relayed to the twin's."""
        target = parse_pod_path(request.path)
        if target is None:
            raise web.HTTPNotFound()
        twin = self.twin(target)
        websocket = is_websocket(request)
        if not websocket and not upgrade.is_spdy_upgrade(request.headers.items()):
            return _text(400, "Upgrade request required")
        claim(request)  # what the caller sends while the remote is dialled is the session's
        ports: list[int] = []
        if websocket and target.action == "portForward":
            try:
                ports = ports_of(list(request.query.items()))
            except ValueError:
                return _text(400, "invalid or missing ports")
        if (refusal := self._unreachable()) is not None:
            return refusal
        path = remote_pod_path(twin.remote_namespace, target.pod,
                               REMOTE_SUBRESOURCES[target.action])
        query = remote_stream_query(target, list(request.query.items()))
        try:
            answer, remote = await dial(
                self.remote.live.current, path, query,
                remote_protocols(target.action) if websocket else offered_protocols(request),
                CONNECT_TIMEOUT)
        except (OSError, TimeoutError, ValueError, asyncio.IncompleteReadError) as error:
            return self._remote_failed(error)
        if remote is None:
            return _text(answer.status, _status_message(answer.body))
        if websocket:
            return await bridge(request, target.action, remote, ports)
        log.debug("kubelet API: %s %s/%s relayed to %s (%s)", target.action, target.namespace,
                  target.pod, twin.remote_namespace, answer.header(upgrade.HEADER_PROTOCOL_VERSION))
        response = web.StreamResponse(status=101, headers=upgrade.response_headers(
            answer.header(upgrade.HEADER_PROTOCOL_VERSION)))
        reader, writer = await switch_protocols(request, response)
        caller = spdy3.Connection(reader, writer, server=True)
        await relay(caller, remote, lambda: self.sources.health().ready is False, HEALTH_POLL)
        return response

    def application(self) -> web.Application:
        # Counted before the guard: refusals (401, 403) are counted too.
        app = web.Application(middlewares=[
            *([self.served.middleware] if self.served is not None else []), self.guard])
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/pods", self.pods)
        app.router.add_get("/pods/", self.pods)
        app.router.add_get("/stats/summary", self.stats_summary)
        app.router.add_get("/metrics/resource", self.resource_metrics)
        app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", self.container_logs)
        for action in ("exec", "attach"):
            for tail in ("{container}", "{uid}/{container}"):
                app.router.add_route("*", f"/{action}/{{namespace}}/{{pod}}/{tail}",
                                     self.stream_session)
        app.router.add_route("*", "/portForward/{namespace}/{pod}", self.stream_session)
        app.router.add_route("*", "/portForward/{namespace}/{pod}/{uid}", self.stream_session)
        return app


def _status_message(body: bytes) -> str:
    import orjson

    try:
        status = orjson.loads(body)
    except ValueError:
        return body.decode(errors="replace")
    if isinstance(status, dict) and status.get("message"):
        return str(status["message"])
    return body.decode(errors="replace")


def serving_context(config: AgentConfig, node_name: str) -> ssl.SSLContext:
    """The TLS of the kubelet API of `node_name`: the mounted pair, else one self-signed for
    that node and the agent's address."""
    context = _mounted_context(config)
    if not (config.kubelet_cert and config.kubelet_key):
        load_pair(context, *self_signed(node_name, [config.agent_ip]))
    return context


def _mounted_context(config: AgentConfig) -> ssl.SSLContext:
    """A serving TLS context with what is mounted: the pair, the client CA."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    if config.kubelet_cert and config.kubelet_key:
        context.load_cert_chain(config.kubelet_cert, config.kubelet_key)
    if config.kubelet_client_ca:
        context.verify_mode = ssl.CERT_OPTIONAL  # a bearer token may stand in for it
        context.load_verify_locations(config.kubelet_client_ca)
    return context


@dataclass
class _Served:
    """A node's kubelet API being served: its socket, its aiohttp runner, and the task
    renewing its serving certificate (with `--kubelet-serving-cert-from-csr`)."""

    socket: socket.socket
    runner: web.AppRunner
    certificates: asyncio.Task[None] | None


class KubeletServer:
    """The kubelet API of each of the agent's nodes, each on a port of its own, all on one thread
    and loop of their own.

    kube-apiserver reaches a node's kubelet at the node's address and its
    `daemonEndpoints.kubeletEndpoint.Port` only (pkg/kubelet/client's GetConnectionInfo); it
    dials an IP address, so its TLS sends no server name (no SNI for an IP), and its Host header
    is that address and port. The agent's Nodes share the agent's address: the port is the only
    thing that tells which node a request is for. So each node gets a listener of its own, whose
    authorization names that node, whose serving certificate is that node's, and whose
    node-wide endpoints (/pods, /stats/summary, /metrics/resource) count that node's pods only:
    `kubectl top node` and metrics-server see each pool's pods once, on its own node.

    The first port (`--kubelet-port`; 0: any free port) is bound at once, so that a port taken
    fails the start, and goes to the agent's first node; a node new gets the lowest free port
    from `--kubelet-port` up (with 0: any free port), the nodes found at once in the order of
    their names, so that every start with the same nodes gives them the same ports. A node that
    is no longer the agent's has its listener closed, its port free again. The nodes followed
    are `sources.node_names()` once `sources.listed()`: before the home cluster is listed, a
    caller waits for its answer rather than read a wrong one; the node reconcile asks its
    nodes' ports (`ports`), opening any missing at once."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        _mounted_context(config)  # what cannot be read fails the start, not each node later
        self._spare: socket.socket | None = socket.create_server(
            (config.kubelet_address, config.kubelet_port), reuse_port=False)
        self.port: int = self._spare.getsockname()[1]
        """The first port: the one `--kubelet-port` asks for, or the one bound for 0."""
        self._lock = threading.Lock()
        self._listening: dict[str, socket.socket] = {}
        """node name → its socket, served (`_served`) once the loop has started it."""
        self._served: dict[str, _Served] = {}
        self._wake: asyncio.Event | None = None
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self.certificates: dict[str, ServingCertificates] = {}
        """Each node's serving certificates, with `--kubelet-serving-cert-from-csr`."""
        self.requests = ServedRequests(KUBELET_REQUESTS, route_of)
        """The APIs' requests, counted on its thread, read by /metrics."""

    # --- the nodes' ports --------------------------------------------------------------------

    def _bind_free(self, taken: set[int]) -> socket.socket:
        """A listening socket on the lowest free port from `--kubelet-port` up that is not
        `taken` by another node (0: any free port)."""
        address, first = self.config.kubelet_address, self.config.kubelet_port
        if first == 0:
            return socket.create_server((address, 0), reuse_port=False)
        for port in range(first, 65536):
            if port in taken:
                continue
            try:
                return socket.create_server((address, port), reuse_port=False)
            except OSError as error:
                if error.errno != errno.EADDRINUSE:
                    raise
        raise OSError(errno.EADDRINUSE, f"no free port from {first} up on {address}")

    def _open(self, names: Collection[str]) -> None:
        """A socket for each of `names` that has none (the lock held)."""
        for name in sorted(set(names) - set(self._listening)):
            if self._spare is not None:
                self._listening[name], self._spare = self._spare, None
            else:
                taken = {sock.getsockname()[1] for sock in self._listening.values()}
                self._listening[name] = self._bind_free(taken)

    def ports(self, names: Collection[str]) -> dict[str, int]:
        """The port of each node of `names`, a listener opened at once for a node that has none
        (served as soon as the kubelet loop gets to it: a caller meanwhile waits)."""
        with self._lock:
            self._open(names)
            ports = {name: self._listening[name].getsockname()[1] for name in names}
        self._poke()
        return ports

    def _poke(self) -> None:
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop has stopped
                loop.call_soon_threadsafe(wake.set)

    # --- the thread --------------------------------------------------------------------------

    def start(self, sources: KubeletSources) -> None:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve(sources)),
                                        name="kubelet-api", daemon=True)
        self._thread.start()
        self._started.wait(10)

    def alive(self) -> bool:
        return self._thread is None or self._thread.is_alive()

    async def _serve(self, sources: KubeletSources) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop, self._wake = asyncio.Event(), asyncio.Event()
        home = ClusterApi(sources.home, throttle_reads=False)
        remote = RemoteSession(sources.remote)
        remote_api = ClusterApi(sources.remote, throttle_reads=False)
        usage = Usage(sources.node_pods, remote_api)
        reviews = Reviews(home)

        def api(name: str) -> KubeletApi:
            return KubeletApi(name, sources, reviews, remote, bool(self.config.kubelet_client_ca),
                              usage, self.requests)

        self._started.set()
        try:
            while not self._stop.is_set():
                self._wake.clear()
                try:
                    await self._follow(sources, api, home)
                except OSError as error:
                    log.error("kubelet API: cannot serve every node: %s", error)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(FOLLOW_POLL):
                        await self._wake.wait()
        finally:
            for name in list(self._served):
                await self._close(name)
            await remote.close()
            await remote_api.close()
            await home.close()

    async def _follow(self, sources: KubeletSources, api: Callable[[str], KubeletApi],
                      home: ClusterApi) -> None:
        """Serve the agent's nodes as they are now: a listener closed for a node gone (first,
        so that its port is free again), opened and served for a node new."""
        if sources.listed():
            names = set(sources.node_names())
            with self._lock:
                gone = {name: self._listening.pop(name) for name in set(self._listening) - names}
            for name, sock in gone.items():
                if name in self._served:
                    await self._close(name)
                sock.close()
            with self._lock:
                self._open(names)
        with self._lock:
            listening = dict(self._listening)
        for name, sock in listening.items():
            served = self._served.get(name)
            if served is not None and served.socket is not sock:
                await self._close(name)  # gone and back meanwhile, on a socket of its own
            if name not in self._served:
                await self._open_site(name, sock, api(name), home)

    async def _open_site(self, name: str, sock: socket.socket, api: KubeletApi,
                         home: ClusterApi) -> None:
        context = serving_context(self.config, name)
        runner = web.AppRunner(api.application(), access_log=None, handler_cancellation=True)
        await runner.setup()
        await web.SockSite(runner, sock, ssl_context=context).start()
        log.info("kubelet API of node %s serving on https://%s:%d", name,
                 self.config.kubelet_address, sock.getsockname()[1])
        certificates = None
        if self.config.kubelet_serving_cert_from_csr:
            self.certificates[name] = ServingCertificates(home, context, name,
                                                          [self.config.agent_ip])
            certificates = asyncio.create_task(self.certificates[name].run())
        self._served[name] = _Served(sock, runner, certificates)

    async def _close(self, name: str) -> None:
        served = self._served.pop(name)
        self.certificates.pop(name, None)
        if served.certificates is not None:
            served.certificates.cancel()
        await served.runner.cleanup()
        served.socket.close()
        log.info("kubelet API of node %s closed", name)

    def stop(self) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has stopped
                loop.call_soon_threadsafe(stop.set)
        self._poke()
        if self._thread is not None:
            self._thread.join(10)
        with self._lock:
            for sock in [*self._listening.values(), *([self._spare] if self._spare else [])]:
                sock.close()
