"""The kubelet API of the simulated nodes (pkg/kubelet/server): HTTPS per node, client
certificates of the cluster CA or bearer tokens, authorization as the kubelet's Webhook mode
maps paths (nodes/proxy, nodes/log, nodes/stats, nodes/metrics), and

  /healthz, /pods, /containerLogs/NS/POD/CONTAINER, /exec|/attach/NS/POD/CONTAINER (SPDY and
  WebSocket v4/v5.channel.k8s.io), /portForward/NS/POD (SPDY and WebSocket),
  /stats/summary, /metrics/resource.

Each node listens on its own loopback port; `network` maps the addresses the Node advertises
(InternalIP, Hostname, at daemonEndpoints' port) to it, as the cluster's network would."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from kubesim import shell
from kubesim.apiserver import RequestAttributes, User
from kubesim.controllers.kubelet import ContainerRuntime, Kubelet, PodRuntime
from kubesim.store import dumps
from kubesim.tls import KubeletTLS
from kubesim.upgraded import message_bytes
from spdy3 import Connection, channels, upgrade
from spdy3.aiohttp_upgrade import switch_protocols
from spdy3.connection import Stream

log = logging.getLogger(__name__)
Network = dict[tuple[str, int], tuple[str, int]]
# how long the kubelet waits for a client's streams (--streaming-connection-idle-timeout aside)
STREAM_CREATION_TIMEOUT = 30.0
KUBELET_STREAM_PARAMS = (("stdin", "input"), ("stdout", "output"), ("stderr", "error"),
                         ("tty", "tty"))
"""Each exec/attach stream and the kubelet's query parameter for it (api.ExecStdinParam...):
not the pods/exec API's names, which kube-apiserver translates (strategy.go streamParams)."""
WEBSOCKET_EXEC_PROTOCOLS = (upgrade.REMOTECOMMAND_V5, upgrade.REMOTECOMMAND_V4)
WEBSOCKET_PORTFORWARD_PROTOCOLS = (upgrade.REMOTECOMMAND_V4, upgrade.PORTFORWARD_V1)


class KubeletApi:
    def __init__(self, kubelet: Kubelet, tls: KubeletTLS,
                 authenticate: Callable[[str], User | None], network: Network,
                 host: str = "127.0.0.1") -> None:
        self.kubelet = kubelet
        self.tls = tls
        self.authenticate_token = authenticate
        self.network = network
        self.host = host
        self._runners: list[web.AppRunner] = []
        self._node_cpu: dict[str, tuple[float, float]] = {}  # node -> (read at, CPU seconds)

    async def start(self, addresses: Callable[[str], list[str]], port: int) -> None:
        for node in self.kubelet.node_names:
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", self._handler(node))
            runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=1.0)
            await runner.setup()
            hosts = [self.host, *addresses(node)]
            site = web.TCPSite(runner, self.host, 0,
                               ssl_context=self.tls.serving_context(*dict.fromkeys(hosts)))
            await site.start()
            server = site._server
            assert server is not None
            bound = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
            for address in addresses(node):
                self.network[(address, port)] = (self.host, bound)
            self._runners.append(runner)

    async def stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()

    def _handler(self, node: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            user = self._authenticate(request)
            if user is None:
                return web.Response(status=401, text="Unauthorized")
            attributes = _attributes(user, request, node)
            allowed, _ = self.kubelet.api.authorizer.authorize(attributes)
            if not allowed:
                return web.Response(status=403, text=(
                    f"Forbidden (user={user.name}, verb={attributes.verb}, resource=nodes, "
                    f"subresource={attributes.subresource})"))
            try:
                return await self._route(request, node)
            except LookupError as error:
                return web.Response(status=404, text=str(error.args[0]))
        return handle

    def _authenticate(self, request: web.Request) -> User | None:
        header = request.headers.get("Authorization", "")
        if header[:7].lower() == "bearer ":
            return self.authenticate_token(header[7:].strip())
        ssl_object = request.transport.get_extra_info("ssl_object") if request.transport else None
        certificate = ssl_object.getpeercert() if isinstance(ssl_object, ssl.SSLObject) else None
        if not certificate:
            return None
        # the user is the subject's CN, its groups the subject's O values (x509 authenticator)
        subject: Any = certificate.get("subject", ())
        pairs = [pair for rdn in subject for pair in rdn]
        common_names = [str(v) for k, v in pairs if k == "commonName"]
        groups = tuple(str(v) for k, v in pairs if k == "organizationName")
        return User(common_names[0] if common_names else "", groups + ("system:authenticated",))

    async def _route(self, request: web.Request, node: str) -> web.StreamResponse:
        parts = request.path.strip("/").split("/")
        if request.path in ("/healthz", "/healthz/"):
            return web.Response(text="ok")
        if parts[0] == "pods" and len(parts) == 1:
            return web.Response(body=dumps({"kind": "PodList", "apiVersion": "v1",
                                            "metadata": {}, "items": self._pod_objects(node)}),
                                content_type="application/json")
        if parts[0] == "containerLogs" and len(parts) == 4:
            return await self._logs(request, node, *parts[1:])
        if parts[0] in ("exec", "attach") and len(parts) == 4:
            return await self._exec(request, node, parts[0], *parts[1:])
        if parts[0] == "portForward" and len(parts) == 3:
            return await self._port_forward(request, node, parts[1], parts[2])
        if parts[:2] == ["stats", "summary"]:
            return web.Response(body=dumps(self._summary(node)),
                                content_type="application/json")
        if parts[:2] == ["metrics", "resource"]:
            return web.Response(text=self._resource_metrics(node), content_type="text/plain")
        return web.Response(status=404, text="404 page not found\n")

    # ---------------------------------------------------------------------------- pods
    def _pod_objects(self, node: str) -> list[Any]:
        pods = []
        for (namespace, name), runtime in self.kubelet.runtimes.items():
            stored = self.kubelet.api.store.get(self.kubelet.pods_kind.storage_key,
                                                namespace, name)
            if runtime.node == node and stored is not None:
                pods.append(stored.obj)
        return pods

    def _pod(self, node: str, namespace: str, name: str) -> PodRuntime:
        runtime = self.kubelet.runtimes.get((namespace, name))
        if runtime is None or runtime.node != node:
            raise LookupError(f'pod "{name}" does not exist')
        return runtime

    def _container(self, node: str, namespace: str, name: str,
                   container: str) -> tuple[PodRuntime, ContainerRuntime]:
        runtime = self._pod(node, namespace, name)
        target = runtime.containers.get(container)
        if target is None:
            raise LookupError(f'container "{container}" not found in pod "{name}"')
        return runtime, target

    # ---------------------------------------------------------------------------- logs
    async def _logs(self, request: web.Request, node: str, namespace: str, name: str,
                    container: str) -> web.StreamResponse:
        _, target = self._container(node, namespace, name, container)
        query = request.query
        previous = _bool(query.get("previous"))
        if previous and not target.last_state.get("terminated"):
            # validateContainerLogStatus, answered 400 by the server's getContainerLogs
            return web.Response(status=400, text=(
                f'previous terminated container "{container}" in pod "{name}" not found'))
        follow = _bool(query.get("follow")) and not previous
        timestamps = _bool(query.get("timestamps"))
        try:
            tail = int(query["tailLines"]) if "tailLines" in query else None
            limit = int(query["limitBytes"]) if "limitBytes" in query else None
            since = _since(query)
        except ValueError as error:
            return web.Response(status=400, text=str(error))
        lines = target.previous_logs if previous else target.logs
        times = target.previous_log_times if previous else target.log_times
        start = 0 if tail is None else max(0, len(lines) - tail)
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        written = 0

        async def emit(index: int) -> bool:
            nonlocal written
            if since is not None and times[index] < since:
                return True
            text = lines[index]
            if timestamps:
                text = f"{_rfc3339nano(times[index])} {text}"
            data = text.encode()
            if limit is not None and written + len(data) > limit:
                data = data[:limit - written]
            written += len(data)
            await response.write(data)
            return limit is None or written < limit

        index = start
        while True:
            event = target.log_written
            while index < len(lines):
                if not await emit(index):
                    return response
                index += 1
            if not follow or not target.running:
                break
            await event.wait()
        await response.write_eof()
        return response

    # ---------------------------------------------------------------------------- exec
    async def _exec(self, request: web.Request, node: str, verb: str, namespace: str,
                    name: str, container: str) -> web.StreamResponse:
        runtime, target = self._container(node, namespace, name, container)
        query = request.query
        # remotecommand.NewOptions (pkg/kubelet/cri/streaming/remotecommand/httpstream.go): the
        # kubelet's own names, set only by "1", as kube-apiserver's streamParams writes them
        wanted = {stream: query.get(param) == "1" for stream, param in KUBELET_STREAM_PARAMS}
        if wanted["tty"]:
            wanted["stderr"] = False  # a terminal merges stderr into stdout
        if not (wanted["stdin"] or wanted["stdout"] or wanted["stderr"]):
            return web.Response(status=400,
                                text="you must specify at least 1 of stdin, stdout, stderr")
        argv = query.getall("command", []) if verb == "exec" else []
        if verb == "exec" and not argv:
            return web.Response(status=400, text="you must specify at least 1 command")
        streams = await self._accept_streams(request, wanted, remotecommand=True)
        if isinstance(streams, web.StreamResponse):
            return streams
        session, response = streams
        try:
            code: int | None
            if verb == "attach":
                code, message = await self._attach(session, target)
            else:
                code, message = await self._run(session, argv, runtime, container)
            if code is None:
                await session.status(channels.failure_status(message))
            elif code == 0:
                await session.status(channels.success_status())
            else:
                await session.status(channels.exit_status(code, message))
        finally:
            await session.close()
        return response

    async def _run(self, session: Session, argv: list[str], runtime: PodRuntime,
                   container: str) -> tuple[int | None, str]:
        stdout: shell.Output = session.stdout
        stderr: shell.Output = session.stderr
        stdin: shell.Input = session.stdin
        if session.terminal is not None:  # both outputs go to the terminal
            stdout, stdin = _line_discipline(session)
            stderr = stdout
        context = shell.Context(stdout, stderr, stdin, runtime.hostname,
                                runtime.env.get(container, {}), session.terminal)
        try:
            code = await shell.run(argv, context)
        except shell.NotFound as error:
            return None, ("error executing command in container: failed to exec in container: "
                          f"failed to start exec: {error}")
        return code, f"command terminated with exit code {code}"

    async def _attach(self, session: Session, target: ContainerRuntime) -> tuple[int, str]:
        """Attach: what the container prints from now on, until it ends or the client goes;
        what the client writes goes to the container's input when its spec keeps one open."""
        index = len(target.logs)
        feeding = asyncio.ensure_future(_feed(session, target))
        waiter: asyncio.Future[Any] | None = None
        try:
            while target.running and not session.gone:
                event = target.log_written
                while index < len(target.logs):
                    await session.stdout(target.logs[index].encode())
                    index += 1
                waiter = asyncio.ensure_future(event.wait())
                await asyncio.wait([waiter, session.ended],
                                   return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
        finally:  # also when the server drops the request
            if not feeding.done():
                feeding.cancel()
                # the session went before its input ended: a stdinOnce container's input ends
                # with its first attach all the same (containerd closes it when the attach's
                # stdin copy ends, on an error too)
                if session.wanted["stdin"] and target.input is not None and target.stdin_once:
                    target.input.put_nowait(b"")
            if waiter is not None:
                waiter.cancel()
        return 0, ""

    async def _accept_streams(self, request: web.Request, wanted: dict[str, bool],
                              remotecommand: bool
                              ) -> tuple[Session, web.StreamResponse] | web.StreamResponse:
        if _is_websocket(request):
            protocols = WEBSOCKET_EXEC_PROTOCOLS
            websocket = web.WebSocketResponse(protocols=protocols)
            await websocket.prepare(request)
            return WebSocketSession(websocket, wanted), websocket
        answer = _spdy_handshake(request, upgrade.REMOTECOMMAND_PROTOCOLS)
        if isinstance(answer, web.StreamResponse):
            return answer
        response, protocol = answer
        reader, writer = await switch_protocols(request, response)
        connection = Connection(reader, writer, server=True)
        session = SpdySession(connection, wanted)
        await session.collect()
        return session, response

    # ----------------------------------------------------------------------- port-forward
    async def _port_forward(self, request: web.Request, node: str, namespace: str,
                            name: str) -> web.StreamResponse:
        runtime = self._pod(node, namespace, name)
        stored = self.kubelet.api.store.get(self.kubelet.pods_kind.storage_key, namespace, name)
        declared = {int(p.get("containerPort", 0)) for c in
                    ((stored.obj if stored else {}).get("spec", {}).get("containers") or [])
                    for p in c.get("ports") or []}
        if _is_websocket(request):
            return await self._port_forward_websocket(request, runtime, declared)
        answer = _spdy_handshake(request, (upgrade.PORTFORWARD_V1,))
        if isinstance(answer, web.StreamResponse):
            return answer
        response, _ = answer
        reader, writer = await switch_protocols(request, response)
        connection = Connection(reader, writer, server=True)
        pairs: dict[str, dict[str, Stream]] = {}
        tasks: list[asyncio.Task[None]] = []
        while (stream := await connection.accept()) is not None:
            request_id = stream.header(channels.REQUEST_ID)
            pair = pairs.setdefault(request_id, {})
            pair[stream.header(channels.STREAM_TYPE)] = stream
            if channels.DATA in pair and channels.ERROR in pair:
                tasks.append(asyncio.ensure_future(self._forward_spdy(
                    pairs.pop(request_id), runtime, declared)))
        for task in tasks:
            task.cancel()
        return response

    async def _forward_spdy(self, pair: dict[str, Stream], runtime: PodRuntime,
                            declared: set[int]) -> None:
        data, error = pair[channels.DATA], pair[channels.ERROR]
        port = int(data.header(channels.PORT) or 0)
        if port not in declared:
            await error.write(_refused(runtime, port).encode())
            await error.close()
            await data.close()
            return
        while chunk := await data.read():  # the simulated listener echoes
            await data.write(chunk)
        await data.close()
        await error.close()

    async def _port_forward_websocket(self, request: web.Request, runtime: PodRuntime,
                                      declared: set[int]) -> web.StreamResponse:
        try:
            # portforward.NewV4Options: the kubelet reads `port` (api.PortHeader), each value
            # a comma-separated list, as kube-apiserver's streamParams joins them
            ports = [int(p) for value in request.query.getall("port", [])
                     for p in value.split(",")]
        except ValueError:
            return web.Response(status=400, text="invalid port")
        if not ports:
            return web.Response(status=400, text="query parameter \"port\" is required")
        websocket = web.WebSocketResponse(protocols=WEBSOCKET_PORTFORWARD_PROTOCOLS)
        await websocket.prepare(request)
        for index, port in enumerate(ports):
            data_channel, error_channel = channels.port_channels(index)
            await websocket.send_bytes(channels.channel_message(
                data_channel, channels.port_prefix(port)))
            await websocket.send_bytes(channels.channel_message(
                error_channel, channels.port_prefix(port)))
            if port not in declared:
                await websocket.send_bytes(channels.channel_message(
                    error_channel, _refused(runtime, port).encode()))
        async for message in websocket:
            data = message_bytes(message)
            if not data:
                continue
            channel, payload = channels.parse_channel_message(data)
            index, kind = divmod(channel, 2)
            if kind == 0 and index < len(ports) and ports[index] in declared and payload:
                await websocket.send_bytes(channels.channel_message(channel, payload))
        return websocket

    # ---------------------------------------------------------------------------- stats
    def _usage(self, node: str) -> list[tuple[str, str, str, int, int]]:
        """(namespace, pod, container, cpu nanocores, memory bytes) of the running
        containers: a steady simulated load."""
        usage = []
        for (namespace, name), runtime in sorted(self.kubelet.runtimes.items()):
            if runtime.node != node:
                continue
            for container in runtime.containers.values():
                if container.running:
                    usage.append((namespace, name, container.name, 1_000_000, 4 * 1024 * 1024))
        return usage

    def _summary(self, node: str) -> dict[str, Any]:
        now = _rfc3339(time.time())
        pods: dict[tuple[str, str], dict[str, Any]] = {}
        for namespace, name, container, cpu, memory in self._usage(node):
            runtime = self.kubelet.runtimes[(namespace, name)]
            pod = pods.setdefault((namespace, name), {
                "podRef": {"name": name, "namespace": namespace, "uid": runtime.uid},
                "startTime": runtime.started_at, "containers": [],
                "cpu": {"time": now, "usageNanoCores": 0},
                "memory": {"time": now, "workingSetBytes": 0}})
            pod["containers"].append({
                "name": container, "startTime": runtime.started_at,
                "cpu": {"time": now, "usageNanoCores": cpu},
                "memory": {"time": now, "workingSetBytes": memory}})
            pod["cpu"]["usageNanoCores"] += cpu
            pod["memory"]["workingSetBytes"] += memory
        total_cpu = sum(p["cpu"]["usageNanoCores"] for p in pods.values())
        total_memory = sum(p["memory"]["workingSetBytes"] for p in pods.values())
        return {"node": {"nodeName": node, "cpu": {"time": now, "usageNanoCores": total_cpu},
                         "memory": {"time": now, "workingSetBytes": total_memory}},
                "pods": list(pods.values())}

    def _resource_metrics(self, node: str) -> str:
        """Cumulative CPU seconds (the steady load since the container started) and working
        sets, per container and for the node, with the samples' times in milliseconds."""
        now = time.time()
        stamp = int(now * 1000)
        containers = []
        for namespace, name, container, cpu, memory in self._usage(node):
            started = _seconds(self.kubelet.runtimes[(namespace, name)]
                               .containers[container].started_at)
            labels = f'container="{container}",namespace="{namespace}",pod="{name}"'
            containers.append((labels, cpu / 1e9 * max(0.0, now - started), memory, started))
        # the node's counter only grows: the current load over the time since the last read
        last, counted = self._node_cpu.get(node, (now, 0.0))
        counted += sum(cpu for _, _, _, cpu, _ in self._usage(node)) / 1e9 * (now - last)
        self._node_cpu[node] = (now, counted)
        lines = [
            "# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by "
            "the container in core-seconds",
            "# TYPE container_cpu_usage_seconds_total counter",
            *(f"container_cpu_usage_seconds_total{{{labels}}} {seconds:.9f} {stamp}"
              for labels, seconds, _, _ in containers),
            "# HELP container_memory_working_set_bytes [STABLE] Current working set of the "
            "container in bytes", "# TYPE container_memory_working_set_bytes gauge",
            *(f"container_memory_working_set_bytes{{{labels}}} {memory} {stamp}"
              for labels, _, memory, _ in containers),
            "# HELP container_start_time_seconds [STABLE] Start time of the container since "
            "unix epoch in seconds", "# TYPE container_start_time_seconds gauge",
            *(f"container_start_time_seconds{{{labels}}} {started:.9f} {stamp}"
              for labels, _, _, started in containers),
            "# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the "
            "node in core-seconds", "# TYPE node_cpu_usage_seconds_total counter",
            f"node_cpu_usage_seconds_total {counted:.9f} {stamp}",
            "# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in "
            "bytes", "# TYPE node_memory_working_set_bytes gauge",
            f"node_memory_working_set_bytes {sum(c[2] for c in containers)} {stamp}",
        ]
        return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------- sessions
async def _feed(session: Session, target: ContainerRuntime) -> None:
    """An attached client's input to the container's (dropped when the spec has no stdin)."""
    if not session.wanted["stdin"]:
        return
    while chunk := await session.stdin():
        if target.input is not None:
            target.input.put_nowait(chunk)
    if target.input is not None and target.stdin_once:
        target.input.put_nowait(b"")


def _line_discipline(session: Session) -> tuple[shell.Output, shell.Input]:
    """A pseudo-terminal between the program and the client: input is echoed, output's line
    ends become CR LF."""
    async def output(data: bytes) -> None:
        await session.stdout(data.replace(b"\n", b"\r\n"))

    async def input_() -> bytes:
        data = await session.stdin()
        if data:
            await output(data)
        return data

    return output, input_


class Session:
    """The stdin/stdout/stderr/error channels of one exec or attach, whatever the transport,
    and its terminal's size when it has one."""

    def __init__(self, wanted: dict[str, bool]) -> None:
        self.wanted = wanted
        self.terminal = shell.Terminal() if wanted["tty"] else None
        self.ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    @property
    def gone(self) -> bool:
        return self.ended.done()

    def resize(self, raw: bytes) -> None:
        if self.terminal is not None:
            for columns, rows in channels.parse_resize(raw):
                self.terminal.rows, self.terminal.columns = rows, columns

    async def stdin(self) -> bytes:
        raise NotImplementedError

    async def stdout(self, data: bytes) -> None:
        raise NotImplementedError

    async def stderr(self, data: bytes) -> None:
        raise NotImplementedError

    async def status(self, raw: bytes) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError


class SpdySession(Session):
    def __init__(self, connection: Connection, wanted: dict[str, bool]) -> None:
        super().__init__(wanted)
        self.connection = connection
        self.streams: dict[str, Stream] = {}

    async def collect(self) -> None:
        """Wait for the error stream and each stream the query asked for (the client opens
        them right after the upgrade)."""
        expected = {channels.ERROR} | {kind for kind in (channels.STDIN, channels.STDOUT,
                                                         channels.STDERR)
                                       if self.wanted[kind]}
        if self.wanted["tty"]:
            expected.add(channels.RESIZE)

        async def gather() -> None:
            while not expected <= self.streams.keys():
                stream = await self.connection.accept()
                if stream is None:
                    return
                self.streams[stream.header(channels.STREAM_TYPE)] = stream

        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(gather(), STREAM_CREATION_TIMEOUT)
        self.connection_watch = asyncio.ensure_future(self._watch())
        self.resizing = asyncio.ensure_future(self._resizes())

    async def _resizes(self) -> None:
        stream = self.streams.get(channels.RESIZE)
        pending = b""  # a JSON object may arrive in pieces
        while stream is not None and (data := await stream.read()):
            pending += data
            with contextlib.suppress(ValueError):
                self.resize(pending)
                pending = b""

    async def _watch(self) -> None:
        await self.connection.wait_closed()
        if not self.ended.done():
            self.ended.set_result(None)

    async def stdin(self) -> bytes:
        stream = self.streams.get(channels.STDIN)
        return await stream.read() if stream is not None else b""

    async def _write(self, kind: str, data: bytes) -> None:
        stream = self.streams.get(kind)
        if stream is not None:
            with contextlib.suppress(Exception):
                await stream.write(data)

    async def stdout(self, data: bytes) -> None:
        await self._write(channels.STDOUT, data)

    async def stderr(self, data: bytes) -> None:
        await self._write(channels.STDERR, data)

    async def status(self, raw: bytes) -> None:
        await self._write(channels.ERROR, raw)

    async def close(self) -> None:
        for stream in self.streams.values():
            with contextlib.suppress(Exception):
                await stream.close()
        await self.connection.close()
        self.connection_watch.cancel()
        self.resizing.cancel()


class WebSocketSession(Session):
    def __init__(self, websocket: web.WebSocketResponse, wanted: dict[str, bool]) -> None:
        super().__init__(wanted)
        self.websocket = websocket
        self.v5 = websocket.ws_protocol == upgrade.REMOTECOMMAND_V5
        self.input: asyncio.Queue[bytes] = asyncio.Queue()
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        try:
            async for message in self.websocket:
                data = message_bytes(message)
                if not data:
                    continue
                channel, payload = channels.parse_channel_message(data)
                if channel == channels.CHANNEL_STDIN:
                    if payload:
                        self.input.put_nowait(payload)
                elif channel == channels.CHANNEL_RESIZE:
                    self.resize(payload)
                elif channel == channels.CHANNEL_CLOSE and self.v5 and payload[:1] == bytes(
                        [channels.CHANNEL_STDIN]):
                    self.input.put_nowait(b"")
        finally:
            self.input.put_nowait(b"")
            if not self.ended.done():
                self.ended.set_result(None)

    async def stdin(self) -> bytes:
        if not self.wanted["stdin"]:
            return b""
        return await self.input.get()

    async def _send(self, channel: int, data: bytes) -> None:
        if not self.websocket.closed:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await self.websocket.send_bytes(channels.channel_message(channel, data))

    async def stdout(self, data: bytes) -> None:
        if self.wanted["stdout"]:
            await self._send(channels.CHANNEL_STDOUT, data)

    async def stderr(self, data: bytes) -> None:
        if self.wanted["stderr"]:
            await self._send(channels.CHANNEL_STDERR, data)

    async def status(self, raw: bytes) -> None:
        await self._send(channels.CHANNEL_ERROR, raw)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.websocket.close()
        self._reader.cancel()


# ------------------------------------------------------------------------------- helpers
def _attributes(user: User, request: web.Request, node: str) -> RequestAttributes:
    """The kubelet's authorizer attributes (pkg/kubelet/server/auth.go): the verb from the
    method, the subresource from the path."""
    verb = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch",
            "DELETE": "delete"}.get(request.method, request.method.lower())
    path = request.path
    subresource = "proxy"
    if path.startswith("/stats"):
        subresource = "stats"
    elif path.startswith("/metrics"):
        subresource = "metrics"
    elif path.startswith("/logs"):
        subresource = "log"
    return RequestAttributes(user, verb, "", "v1", "nodes", subresource, "", node)


def _bool(value: str | None) -> bool:
    """strconv.ParseBool's true values (clients send "true", "1" or Python's "True")."""
    return value in ("1", "t", "T", "true", "TRUE", "True")


def _is_websocket(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").lower() == "websocket"


def _spdy_handshake(request: web.Request, supported: tuple[str, ...]
                    ) -> tuple[web.StreamResponse, str] | web.StreamResponse:
    client = [v.strip() for value in request.headers.getall(upgrade.HEADER_PROTOCOL_VERSION, [])
              for v in value.split(",")]
    protocol = upgrade.negotiate(client, supported)
    if protocol is None:
        refusal = web.Response(status=403, text=upgrade.negotiation_error(client, supported)
                               + "\n")
        for accepted in supported:
            refusal.headers.add(upgrade.HEADER_ACCEPTED_PROTOCOL_VERSIONS, accepted)
        return refusal
    if not upgrade.is_spdy_upgrade(list(request.headers.items())):
        return web.Response(status=400,
                            text="unable to upgrade: missing upgrade headers in request\n")
    response = web.StreamResponse(status=101, reason="Switching Protocols")
    for key, value in upgrade.response_headers(protocol):
        response.headers.add(key, value)
    return response, protocol


def _refused(runtime: PodRuntime, port: int) -> str:
    return (f"error forwarding port {port} to pod {runtime.uid}, uid : failed to execute "
            f"portforward in network namespace: failed to connect to localhost:{port} inside "
            f"namespace, IPv4: dial tcp4 127.0.0.1:{port}: connect: connection refused ")


def _since(query: Any) -> float | None:
    if "sinceSeconds" in query:
        return time.time() - int(query["sinceSeconds"])
    if "sinceTime" in query:
        text = str(query["sinceTime"]).replace("Z", "+00:00")
        return datetime.datetime.fromisoformat(text).timestamp()
    return None


def _seconds(stamp: str) -> float:
    """An RFC 3339 time (a container's startedAt) in Unix seconds."""
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _rfc3339(moment: float) -> str:
    return datetime.datetime.fromtimestamp(moment, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _rfc3339nano(moment: float) -> str:
    stamp = datetime.datetime.fromtimestamp(moment, datetime.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"
