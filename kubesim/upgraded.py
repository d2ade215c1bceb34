"""Upgraded connections on aiohttp's server: once a 101 is sent, the raw bytes of the connection
as an asyncio reader and a writer (what SPDY and proxied upgrades run over)."""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import WSMsgType, web


class _RawParser:
    """Takes the place of aiohttp's payload parser: every byte goes to the reader."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        self.reader.feed_data(data)
        return False, b""

    def feed_eof(self) -> None:
        self.reader.feed_eof()


class TransportWriter:
    def __init__(self, request: web.Request) -> None:
        self._request = request
        transport = request.transport
        assert transport is not None
        self._transport = transport

    def write(self, data: bytes) -> None:
        if self._transport.is_closing():
            raise ConnectionResetError("the connection is closed")
        self._transport.write(data)

    async def drain(self) -> None:
        protocol = self._request.protocol
        if self._transport.is_closing():
            raise ConnectionResetError("the connection is closed")
        if getattr(protocol, "_paused", False):
            await protocol._drain_helper()

    def close(self) -> None:
        self._transport.close()


async def hijack(request: web.Request, response: web.StreamResponse
                 ) -> tuple[asyncio.StreamReader, TransportWriter]:
    """Send the 101 `response` and take the connection over."""
    response.force_close()
    writer = await response.prepare(request)
    assert writer is not None
    send_headers = getattr(writer, "send_headers", None)
    if send_headers is not None:
        send_headers()
    reader = asyncio.StreamReader()
    request.protocol.set_parser(_RawParser(reader))  # type: ignore[arg-type]
    request.protocol.keep_alive(False)
    return reader, TransportWriter(request)


async def pump(reader: asyncio.StreamReader, write: TransportWriter | asyncio.StreamWriter
               ) -> None:
    """Copy bytes until end of input; then close the writing side."""
    try:
        while chunk := await reader.read(65536):
            write.write(chunk)
            await write.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        write.close()


def message_bytes(message: aiohttp.WSMessage) -> bytes:
    """A WebSocket message's bytes: the channel protocols take text messages as bytes too
    (the Python client sends str data as text)."""
    if message.type == WSMsgType.BINARY:
        return bytes(message.data)
    if message.type == WSMsgType.TEXT:
        return str(message.data).encode()
    return b""
