"""exec, attach and port-forward: the caller's SPDY session relayed to the twin pod's.

kube-apiserver tunnels a SPDY exec (or translates kubectl's WebSocket into SPDY, v1.30 on) to
the node's kubelet; the agent upgrades the twin pod's pods/exec|attach|portforward request on
the remote API server with the protocols the caller offered, answers the caller with the one
the remote chose, and then relays stream for stream: every stream the caller opens is opened
remotely with the same headers (streamType, port, requestID), bytes flow both ways, half-closes
and resets follow. The remote kubelet writes the exit code on the error stream, which reaches
the caller untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from urllib.parse import urlencode, urlsplit

from aiohttp import web

import spdy3
from annex.http1 import open_tunnel
from annex.kube import Connection as KubeConnection
from annex.kube import current_token
from annex.kubeapi import ssl_context
from spdy3 import upgrade

log = logging.getLogger(__name__)

DRAIN_TIMEOUT = 10.0
"""Seconds the streams still in flight get to flush once either side closed."""


def offered_protocols(request: web.Request) -> list[str]:
    return [token.strip() for value in request.headers.getall(upgrade.HEADER_PROTOCOL_VERSION,
                                                              [])
            for token in value.split(",") if token.strip()]


async def dial(connection: KubeConnection, path: str, query: list[tuple[str, str]],
               protocols: list[str], timeout: float
               ) -> tuple[upgrade.Response, spdy3.Connection | None]:
    """The remote API server's answer to a SPDY upgrade of `path`, and the session when it is
    a 101."""
    server = urlsplit(connection.server)
    tls = ssl_context(connection)
    port = server.port or (443 if server.scheme == "https" else 80)
    host = server.hostname or ""
    async with asyncio.timeout(timeout):
        tunnel = await open_tunnel(connection.proxy, host, port) if connection.proxy else None
        reader, writer = await asyncio.open_connection(
            None if tunnel else host, None if tunnel else port, sock=tunnel, ssl=tls or None,
            limit=2 ** 20, server_hostname=(connection.tls_server_name or host) if tls else None)
    try:
        headers = upgrade.upgrade_request_headers(protocols)
        token = current_token(connection)
        if token:
            headers.append(("Authorization", f"Bearer {token}"))
        headers.append(("Content-Length", "0"))
        target = path + (f"?{urlencode(query)}" if query else "")
        writer.write(upgrade.request_bytes("POST", target, server.netloc, headers))
        await writer.drain()
        async with asyncio.timeout(timeout):
            response = await upgrade.read_response(reader)
    except BaseException:
        writer.close()
        raise
    if response.status != 101:
        writer.close()
        return response, None
    return response, spdy3.Connection(reader, writer, server=False)


async def _pump(source: spdy3.Stream, target: spdy3.Stream) -> None:
    try:
        while chunk := await source.read():
            await target.write(chunk)
        if source.reset_status is not None:
            target.reset()
        else:
            await target.close()
    except spdy3.StreamReset:
        source.reset()
        target.reset()


async def _pair(stream: spdy3.Stream, remote: spdy3.Connection) -> None:
    log.debug("kubelet API: relaying a %s stream", stream.header("streamType") or "?")
    try:
        twin = await remote.open_stream(stream.headers)
    except spdy3.StreamReset:
        stream.reset()
        return
    await asyncio.gather(_pump(stream, twin), _pump(twin, stream))


async def relay(caller: spdy3.Connection, remote: spdy3.Connection,
                unreachable: Callable[[], bool], poll: float) -> None:
    """Until either side closes (or the remote is declared unreachable: a cut ends the session
    instead of leaving it hanging); what is in flight then gets DRAIN_TIMEOUT to flush."""
    pairs: set[asyncio.Task[None]] = set()

    async def accept() -> None:
        while (stream := await caller.accept()) is not None:
            task = asyncio.create_task(_pair(stream, remote))
            pairs.add(task)
            task.add_done_callback(pairs.discard)

    acceptor = asyncio.create_task(accept())
    try:
        while not (caller.closed or remote.closed):
            ends = [asyncio.create_task(caller.wait_closed()),
                    asyncio.create_task(remote.wait_closed())]
            done, pending = await asyncio.wait(ends, timeout=poll,
                                               return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            if not done and unreachable():
                log.info("kubelet API: remote unreachable, ending a stream session")
                break
        if pairs:
            await asyncio.wait(set(pairs), timeout=DRAIN_TIMEOUT)
    finally:
        acceptor.cancel()
        for task in pairs:
            task.cancel()
        with contextlib.suppress(Exception):
            await remote.close()
        with contextlib.suppress(Exception):
            await caller.close()
