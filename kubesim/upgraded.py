"""Bytes relayed over upgraded connections (the connection itself is taken over with
spdy3.aiohttp_upgrade)."""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import WSMsgType

from spdy3.connection import ByteWriter


async def pump(reader: asyncio.StreamReader, write: ByteWriter) -> None:
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
