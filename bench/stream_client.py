"""Followed logs and exec sessions of pods, opened through the home API server as `kubectl logs
-f` and `kubectl exec -i` open them (what the streams scenario holds open)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field

import aiohttp

from annex.api_paths import core_path
from annex.kube import load_connection
from annex.kubeapi import ssl_context
from spdy3 import channels, upgrade

STREAM_CONTAINER = "main"
STREAM_FIRST_LINE = "ready"


class StreamEnded(Exception):
    """A log stream or an exec session that ended, or failed to open, while the run needed it."""


@dataclass
class Streams:
    """Followed logs and exec sessions of pods, opened through the home API server as `kubectl
    logs -f` and `kubectl exec -i` open them (pods/log with follow; pods/exec over WebSocket,
    v5.channel.k8s.io or v4). Each exec session runs `cat` and is sent a line every
    `echo_interval` seconds, whose echo must come back within `deadline`; each followed log
    must stay open. A stream that ends before `close()` is recorded in `ended`."""

    kubeconfig: str
    deadline: float = 30.0
    echo_interval: float = 1.0
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)
    round_trips: list[float] = field(default_factory=list)
    """Seconds from an exec line sent to its echo read."""
    _session: aiohttp.ClientSession | None = None
    _server: str = ""
    _server_hostname: str | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            connection = load_connection(self.kubeconfig)
            headers = ({"Authorization": f"Bearer {connection.token}"}
                       if connection.token else {})
            self._session = aiohttp.ClientSession(
                headers=headers,
                connector=aiohttp.TCPConnector(ssl=ssl_context(connection), limit=0))
            self._server = connection.server.rstrip("/")
            self._server_hostname = connection.tls_server_name
        return self._session

    async def open(self, kind: str, namespace: str, pod: str) -> None:
        """Open a stream (kind: log or exec) and return once data flows on it; StreamEnded
        when it does not within the deadline."""
        opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        stream = self._log if kind == "log" else self._exec
        what = f"{kind} {namespace}/{pod}"
        task = asyncio.get_running_loop().create_task(self._run(stream(namespace, pod, opened),
                                                                opened, what))
        self.tasks.append(task)
        try:
            async with asyncio.timeout(self.deadline):
                await asyncio.shield(opened)
        except TimeoutError:
            task.cancel()
            raise StreamEnded(f"{what}: no data after {self.deadline:.0f}s") from None

    async def _run(self, stream: Awaitable[None], opened: asyncio.Future[None],
                   what: str) -> None:
        try:
            await stream
            problem = "ended"
        except (aiohttp.ClientError, TimeoutError, StreamEnded, ValueError) as error:
            problem = f"{type(error).__name__}: {error}"
        if not opened.done():
            opened.set_exception(StreamEnded(f"{what}: {problem}"))
        else:
            self.ended.append(f"{what}: {problem}")

    async def _log(self, namespace: str, pod: str, opened: asyncio.Future[None]) -> None:
        session = self.session()
        async with session.get(
                self._server + core_path("pods", namespace, pod, "log"),
                params={"container": STREAM_CONTAINER, "follow": "true"},
                server_hostname=self._server_hostname,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.deadline)) as answer:
            if answer.status != 200:
                raise StreamEnded(f"{answer.status} {(await answer.text())[:300]}")
            async with asyncio.timeout(self.deadline):
                first = await answer.content.readline()
            if first.strip() != STREAM_FIRST_LINE.encode():
                raise StreamEnded(f"first line {first!r}")
            opened.set_result(None)
            while await answer.content.readany():  # a followed log ends only when closed
                pass

    async def _exec(self, namespace: str, pod: str, opened: asyncio.Future[None]) -> None:
        query = [("container", STREAM_CONTAINER), ("command", "cat"), ("stdin", "true"),
                 ("stdout", "true"), ("stderr", "true")]
        session = self.session()
        async with session.ws_connect(
                self._server + core_path("pods", namespace, pod, "exec"), params=query,
                protocols=(upgrade.REMOTECOMMAND_V5, upgrade.REMOTECOMMAND_V4),
                server_hostname=self._server_hostname,
                timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=5)) as ws:
            sent = 0
            echoed = b""
            while True:
                sent += 1
                line = f"{sent}\n".encode()
                started = time.monotonic()
                await ws.send_bytes(channels.channel_message(channels.CHANNEL_STDIN, line))
                while not echoed.endswith(line):
                    async with asyncio.timeout(self.deadline):
                        message = await ws.receive()
                    if message.type != aiohttp.WSMsgType.BINARY:
                        raise StreamEnded(f"{message.type.name} {message.data!r}")
                    channel, data = channels.parse_channel_message(message.data)
                    if channel != channels.CHANNEL_STDOUT:
                        raise StreamEnded(f"channel {channel}: {data[:300]!r}")
                    echoed += data
                self.round_trips.append(time.monotonic() - started)
                echoed = b""
                if not opened.done():
                    opened.set_result(None)
                await asyncio.sleep(self.echo_interval)

    def still_open(self) -> int:
        return sum(1 for task in self.tasks if not task.done())

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()


