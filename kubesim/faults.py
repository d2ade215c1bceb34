"""Fault injection for one simulated cluster, for everyone or for one client identity (user name).

- refuse: for the whole cluster the listening socket is closed (connect() is refused) and open
  connections are reset; for one identity each of its requests resets its connection.
- blackhole: as a network black hole looks to the client: new requests are accepted and never
  answered, in-flight requests get no answer, and open watch streams just stop receiving bytes
  (no events, no bookmarks, no end of stream) while the fault lasts. On restore everything held
  back is delivered in order: stalled streams resume with the events they missed, as TCP
  retransmission delivers them when a partition heals before the connection times out (a client
  that gave up meanwhile has closed its end; the write then fails and the stream ends).
- drop_watches: open watch streams are cut (the connection is reset), once.
- latency: every request waits this long before it is served.
- write_latency: every write (POST, PUT, PATCH, DELETE) waits this long before it is served, as
  a real API server's writes wait for etcd (its commit and fsync: milliseconds) while its reads
  come from memory; the watch event leaves when the answer does, as it does after a commit.
- watch_latency: each write of an open watch stream waits this long: events reach watchers this
  much after they happened (a stream busier than one burst per delay batches them, each then up
  to twice as late). Both are what kubesim lacks to stand in for a real control plane's timing
  (python -m bench --kubesim-latency); restore cuts short the waits in progress.
- restore: lifts every fault.

`Faults` is driven from any thread (tests run clusters on a background loop) and over a small
plain-HTTP JSON control endpoint (`FaultControl`), for clusters running in another process;
`FaultsClient` is that endpoint's client with the same methods.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
import urllib.request
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import asdict, dataclass, field
from typing import Any

from aiohttp import web

from kubesim.responses import USER_KEY, WRITE_GATE_KEY

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class FaultState:
    """What is in force: cluster-wide (`everyone`) or per user name (`users`)."""

    refused: bool = False
    blackholed: bool = False
    latency: float = 0.0
    write_latency: float = 0.0
    watch_latency: float = 0.0

    @property
    def active(self) -> bool:
        return (self.refused or self.blackholed or self.latency > 0 or self.write_latency > 0
                or self.watch_latency > 0)


@dataclass
class _Streams:
    """Open long-running requests (watches) per user, to cut or silence them."""

    by_user: dict[str, weakref.WeakSet[asyncio.Transport]] = field(default_factory=dict)

    def add(self, user: str, transport: asyncio.Transport) -> None:
        self.by_user.setdefault(user, weakref.WeakSet()).add(transport)

    def of(self, user: str | None) -> list[asyncio.Transport]:
        if user is None:
            return [t for transports in self.by_user.values() for t in transports]
        return list(self.by_user.get(user, ()))


def reset(transport: asyncio.BaseTransport | None) -> None:
    """Close a connection with a TCP RST (SO_LINGER 0), as a cut network path looks."""
    if transport is None or transport.is_closing():
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    if isinstance(transport, asyncio.Transport):
        transport.abort()
    else:
        transport.close()


def _is_watch(request: web.Request) -> bool:
    return request.query.get("watch", "").lower() in ("1", "true")


WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class Faults:
    """The fault state of one cluster, its aiohttp middleware and its thread-safe API.

    `stop_listening` / `start_listening` close and reopen the cluster's listening socket (same
    port); the cluster provides them. `loop` is the loop the cluster serves on.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop | None = None,
        stop_listening: Callable[[], Awaitable[None]] | None = None,
        start_listening: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.loop = loop
        self._stop_listening = stop_listening
        self._start_listening = start_listening
        self.everyone = FaultState()
        self.users: dict[str, FaultState] = {}
        self._listening = True
        self._healed = asyncio.Event()  # set by restore(); binds to a loop on first wait
        self._streams = _Streams()
        self._connections: weakref.WeakSet[asyncio.BaseTransport] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._pending: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ the public API

    def refuse(self, user: str | None = None) -> None:
        self._run(self._set(user, refused=True))

    def blackhole(self, user: str | None = None) -> None:
        self._run(self._set(user, blackholed=True))

    def latency(self, seconds: float, user: str | None = None) -> None:
        self._run(self._set(user, latency=float(seconds)))

    def write_latency(self, seconds: float, user: str | None = None) -> None:
        self._run(self._set(user, write_latency=float(seconds)))

    def watch_latency(self, seconds: float, user: str | None = None) -> None:
        self._run(self._set(user, watch_latency=float(seconds)))

    def drop_watches(self, user: str | None = None) -> None:
        self._run(self._drop_watches(user))

    def restore(self) -> None:
        self._run(self._restore())

    def describe(self) -> dict[str, Any]:
        with self._lock:
            return {"everyone": asdict(self.everyone),
                    "users": {name: asdict(state) for name, state in self.users.items()}}

    # ------------------------------------------------------------------ plumbing

    def _run(self, action: Coroutine[Any, Any, None]) -> None:
        """Apply at once on the cluster's loop: from another thread wait for it; on the loop's
        own thread schedule it (the state part is synchronous, so it is in force already)."""
        loop = self.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None and running is (loop or running):
            task = running.create_task(action)
            self._pending.add(task)  # keep a reference until done
            task.add_done_callback(self._pending.discard)
            return
        if loop is None:
            action.close()
            raise RuntimeError("the cluster is not serving yet")
        asyncio.run_coroutine_threadsafe(action, loop).result(timeout=30)

    def _state(self, user: str | None) -> FaultState:
        if user is None:
            return self.everyone
        return self.users.setdefault(user, FaultState())

    def _effective(self, user: str) -> FaultState:
        mine = self.users.get(user, FaultState())
        return FaultState(
            refused=self.everyone.refused or mine.refused,
            blackholed=self.everyone.blackholed or mine.blackholed,
            latency=max(self.everyone.latency, mine.latency),
            write_latency=max(self.everyone.write_latency, mine.write_latency),
            watch_latency=max(self.everyone.watch_latency, mine.watch_latency),
        )

    async def _set(self, user: str | None, **changes: Any) -> None:
        with self._lock:
            state = self._state(user)
            for name, value in changes.items():
                setattr(state, name, value)
        self._healed.clear()
        if changes.get("refused"):
            if user is None:
                if self._stop_listening is not None and self._listening:
                    self._listening = False
                    await self._stop_listening()
                for connection in list(self._connections):
                    reset(connection)
            else:
                for transport in self._streams.of(user):
                    reset(transport)

    async def _drop_watches(self, user: str | None) -> None:
        for transport in self._streams.of(user):
            reset(transport)

    async def _restore(self) -> None:
        with self._lock:
            self.everyone = FaultState()
            self.users.clear()
        if not self._listening and self._start_listening is not None:
            await self._start_listening()
            self._listening = True
        self._healed.set()

    async def _wait_while_blackholed(self, user: str) -> None:
        while self._effective(user).blackholed:
            await self._healed.wait()

    async def _delay(self, seconds: float) -> None:
        """Wait `seconds`, or less if everything is restored meanwhile."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._healed.wait()

    async def _before_watch_write(self, user: str) -> None:
        delay = self._effective(user).watch_latency  # read at each write: changes apply at once
        if delay > 0:
            await self._delay(delay)
        await self._wait_while_blackholed(user)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Runs after authentication: `request[USER_KEY]` names the client."""
        user_obj = request.get(USER_KEY)
        user = str(getattr(user_obj, "name", "") or "")
        transport = request.transport
        if transport is not None:
            self._connections.add(transport)
        state = self._effective(user)
        if state.refused:
            reset(transport)
            return web.Response(status=503)  # never reaches the client: the connection is gone
        if state.latency > 0:
            await asyncio.sleep(state.latency)
        if state.write_latency > 0 and request.method in WRITE_METHODS:
            # the body is in before the storage wait, so a write whose client gives up
            # meanwhile is still made, as etcd still commits it
            await request.read()
            await self._delay(state.write_latency)
        if state.blackholed:
            await self._wait_while_blackholed(user)
        if _is_watch(request) and transport is not None:
            self._streams.add(user, transport)
        # the watch writer waits here before each write: a stream open before a black-hole
        # goes silent instead of being cut, and a watch latency delays its events
        request[WRITE_GATE_KEY] = lambda: self._before_watch_write(user)
        response = await handler(request)
        await self._wait_while_blackholed(user)  # an answer computed meanwhile is held back too
        return response


class FaultControl:
    """The plain-HTTP JSON control endpoint of one cluster's `Faults`, on its own loopback port.

    GET / -> the state; POST / {"action": "refuse"|"blackhole"|"drop_watches"|"latency"|
    "write_latency"|"watch_latency"|"restore", "user": optional name, "seconds": for the
    latencies} -> the new state.
    """

    def __init__(self, faults: Faults, host: str = "127.0.0.1") -> None:
        self.faults = faults
        self.host = host
        self.port = 0
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/", self._get)
        app.router.add_post("/", self._post)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0)
        await site.start()
        server = site._server  # the bound port is only known from the server's socket
        assert isinstance(server, asyncio.base_events.Server)
        self.port = server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _get(self, request: web.Request) -> web.Response:
        return web.json_response(self.faults.describe())

    async def _post(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            action = body["action"]
            user = body.get("user")
            if action in ("latency", "write_latency", "watch_latency"):
                await self.faults._set(user, **{action: float(body["seconds"])})
            elif action in ("refuse", "blackhole"):
                await self.faults._set(user, **{
                    "refused" if action == "refuse" else "blackholed": True})
            elif action == "drop_watches":
                await self.faults._drop_watches(user)
            elif action == "restore":
                await self.faults._restore()
            else:
                raise ValueError(f"unknown action {action!r}")
        except (ValueError, KeyError, TypeError) as error:
            return web.json_response({"error": str(error)}, status=400)
        return web.json_response(self.faults.describe())


class FaultsClient:
    """Drives a `FaultControl` endpoint (e.g. of a kubesim in another process) synchronously."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.url = url
        self.timeout = timeout

    def _post(self, **body: Any) -> dict[str, Any]:
        data = json.dumps({k: v for k, v in body.items() if v is not None}).encode()
        request = urllib.request.Request(self.url, data=data, method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=self.timeout) as reply:
            result: dict[str, Any] = json.loads(reply.read())
            return result

    def refuse(self, user: str | None = None) -> None:
        self._post(action="refuse", user=user)

    def blackhole(self, user: str | None = None) -> None:
        self._post(action="blackhole", user=user)

    def drop_watches(self, user: str | None = None) -> None:
        self._post(action="drop_watches", user=user)

    def latency(self, seconds: float, user: str | None = None) -> None:
        self._post(action="latency", seconds=seconds, user=user)

    def write_latency(self, seconds: float, user: str | None = None) -> None:
        self._post(action="write_latency", seconds=seconds, user=user)

    def watch_latency(self, seconds: float, user: str | None = None) -> None:
        self._post(action="watch_latency", seconds=seconds, user=user)

    def restore(self) -> None:
        self._post(action="restore")

    def describe(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.url, timeout=self.timeout) as reply:
            result: dict[str, Any] = json.loads(reply.read())
            return result


def install_faults(cluster: Any) -> None:
    """Give a `kubesim.cluster.Cluster` its `faults` (middleware installed) and start its
    control endpoint with the cluster (`cluster.fault_control.url`)."""

    async def stop_listening() -> None:
        for site in list(cluster._runner.sites):
            await site.stop()

    async def start_listening() -> None:
        site = web.TCPSite(cluster._runner, cluster.host, cluster.port,
                           ssl_context=cluster.tls.context)
        await site.start()

    faults = Faults(None, stop_listening, start_listening)
    control = FaultControl(faults)
    cluster.faults = faults
    cluster.fault_control = control
    cluster.middlewares.append(faults.middleware)

    async def start(_: Any) -> None:
        faults.loop = asyncio.get_running_loop()
        await control.start()

    async def stop(_: Any) -> None:
        await control.stop()

    cluster.startup_hooks.append(start)
    cluster.shutdown_hooks.append(stop)
