"""An aiohttp server's connection taken over after a 101 Switching Protocols: the raw bytes as an
asyncio reader and a writer, for SPDY/3.1 (or any upgraded protocol relayed as bytes) to run
over. Separate from the rest of the package, which needs no aiohttp.

aiohttp switches its parser off by itself only for WebSocket upgrades: behind any other upgrade
request (SPDY/3.1 among them) it goes on parsing HTTP, so bytes the client sends before the
handler has taken the connection over would be read as a pipelined request and lost to the
upgraded protocol. `claim` stops that as early as the handler knows it is an upgrade; then
`switch_protocols` installs the reader before the 101 leaves, so nothing the client sends once
it has the 101 can reach the HTTP parser either.

Bytes that arrive in the same read as the request head, before any handler runs, are beyond a
handler's reach (aiohttp's parser drops them); clients wait for the 101 before they send, as
Kubernetes' do."""

from __future__ import annotations

import asyncio

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter

READ_LIMIT = 2 ** 20
"""Reading from the client pauses while the reader holds twice this many unread bytes."""


def claim(request: web.Request) -> None:
    """Keep what the client sends after this request for the upgraded protocol. If the handler
    answers without switching after all, aiohttp parses the kept bytes as HTTP, as it does after
    a declined WebSocket upgrade. Does nothing to a request with a body: the upgraded protocol
    starts after the body, which is the HTTP parser's to read."""
    if not request.body_exists:
        # the state aiohttp's parser puts the connection in after a WebSocket upgrade request:
        # what arrives is buffered (reading pauses when the buffer is full) until a payload
        # parser is set
        request.protocol._upgraded = True


class _Feed:
    """Takes the place of aiohttp's payload parser (as a WebSocket reader would): every byte of
    the connection goes to the reader."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        self.reader.feed_data(data)
        return False, b""

    def feed_eof(self) -> None:
        self.reader.feed_eof()


class UpgradedWriter:
    """The writing side of a taken-over connection, with asyncio.StreamWriter's contract:
    `write` never raises, `drain` raises ConnectionResetError once the connection is gone."""

    def __init__(self, transport: asyncio.Transport, payload: AbstractStreamWriter) -> None:
        self._transport = transport
        self._payload = payload

    def write(self, data: bytes) -> None:
        if not self._transport.is_closing():
            self._transport.write(data)

    async def drain(self) -> None:
        if self._transport.is_closing():
            raise ConnectionResetError("the connection is closed")
        await self._payload.drain()

    def close(self) -> None:
        self._transport.close()


async def switch_protocols(request: web.Request, response: web.StreamResponse
                           ) -> tuple[asyncio.StreamReader, UpgradedWriter]:
    """Send the 101 `response` and take the connection over: every byte the client sent after
    the request (since `claim`, which this implies) and sends from now on goes to the returned
    reader, in order; the connection closes once the handler returns."""
    claim(request)
    transport = request.transport
    if transport is None:
        raise ConnectionResetError("the client is gone")
    reader = asyncio.StreamReader(limit=READ_LIMIT)
    reader.set_transport(transport)  # for pause_reading/resume_reading: backpressure
    response.force_close()
    # the reader is in place before the 101 is sent, so the client's first bytes after it
    # cannot be taken for HTTP
    request.protocol.set_parser(_Feed(reader))  # type: ignore[arg-type]
    payload = await response.prepare(request)
    assert payload is not None
    return reader, UpgradedWriter(transport, payload)
