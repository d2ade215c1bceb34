"""exec, attach and port-forward for WebSocket callers (an API server that proxies kubectl's or
a client's WebSocket instead of translating it to SPDY: before v1.30 for exec, before v1.31 or
for clients asking v4.channel.k8s.io for port-forward), bridged to a SPDY session with the twin.

- remotecommand (v5.channel.k8s.io, v4.channel.k8s.io): one channel byte per message (0 stdin,
  1 stdout, 2 stderr, 3 error, 4 resize; v5's [255, 0] ends stdin) ↔ the SPDY v4 streams;
- port-forward (v4.channel.k8s.io, portforward.k8s.io): two channels per port of the `ports`
  query (2i data, 2i+1 error), each opened by the port as a little-endian uint16 ↔ one SPDY
  error and data stream pair per port.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

import aiohttp
from aiohttp import web

import spdy3
from spdy3 import channels, upgrade

REMOTECOMMAND_PROTOCOLS = (upgrade.REMOTECOMMAND_V5, upgrade.REMOTECOMMAND_V4)
PORTFORWARD_PROTOCOLS = (upgrade.REMOTECOMMAND_V4, upgrade.PORTFORWARD_V1)


def is_websocket(request: web.Request) -> bool:
    return (request.headers.get("Upgrade", "").lower() == "websocket"
            and "upgrade" in request.headers.get("Connection", "").lower())


def _flag(query: Mapping[str, str], name: str) -> bool:
    """A stream the kubelet is asked for: its own parameter names (input, output, error,
    tty), set only by "1" (remotecommand.NewOptions)."""
    return query.get(name) == "1"


def ports_of(query: list[tuple[str, str]]) -> list[int]:
    """The ports a kubelet is given (`port`, comma-separated, repeated: portforward.NewV4Options);
    ValueError for anything else."""
    ports = [int(p) for key, value in query if key == "port"
             for p in value.split(",") if p]
    if not ports or any(not 0 < p < 65536 for p in ports):
        raise ValueError("invalid or missing ports")
    return ports


def _payload(message: aiohttp.WSMessage) -> bytes:
    """A message's bytes: the kubelet reads text messages as bytes too (the Python client
    sends str data as text)."""
    if message.type == aiohttp.WSMsgType.BINARY:
        return bytes(message.data)
    if message.type == aiohttp.WSMsgType.TEXT:
        return str(message.data).encode()
    return b""


async def _send(ws: web.WebSocketResponse, channel: int, data: bytes) -> None:
    with contextlib.suppress(ConnectionError, RuntimeError):
        await ws.send_bytes(channels.channel_message(channel, data))


async def _out(stream: spdy3.Stream, ws: web.WebSocketResponse, channel: int) -> None:
    while chunk := await stream.read():
        await _send(ws, channel, chunk)


async def remotecommand(ws: web.WebSocketResponse, remote: spdy3.Connection,
                        query: Mapping[str, str]) -> None:
    tty = _flag(query, "tty")
    error = await remote.open_stream({channels.STREAM_TYPE: channels.ERROR})
    opened: dict[str, spdy3.Stream] = {}
    wanted = [(channels.STDIN, _flag(query, "input")), (channels.STDOUT, _flag(query, "output")),
              (channels.STDERR, _flag(query, "error") and not tty), (channels.RESIZE, tty)]
    for kind, wanted_kind in wanted:
        if wanted_kind:
            opened[kind] = await remote.open_stream({channels.STREAM_TYPE: kind})

    async def incoming() -> None:
        async for message in ws:
            if not (raw := _payload(message)):
                continue
            channel, data = channels.parse_channel_message(raw)
            if channel == channels.CHANNEL_CLOSE and data[:1] == bytes([channels.CHANNEL_STDIN]):
                if channels.STDIN in opened:
                    await opened[channels.STDIN].close()
            elif channel == channels.CHANNEL_STDIN and channels.STDIN in opened:
                await opened[channels.STDIN].write(data)
            elif channel == channels.CHANNEL_RESIZE and channels.RESIZE in opened:
                await opened[channels.RESIZE].write(data)

    reader = asyncio.create_task(incoming())
    try:
        outputs = [_out(opened[kind], ws, channels.CHANNELS[kind])
                   for kind in (channels.STDOUT, channels.STDERR) if kind in opened]
        _, status = await asyncio.gather(asyncio.gather(*outputs), error.read_all())
        await _send(ws, channels.CHANNEL_ERROR, status)
    except spdy3.StreamReset:
        pass
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, spdy3.StreamReset, ConnectionError):
            await reader


async def portforward(ws: web.WebSocketResponse, remote: spdy3.Connection,
                      ports: list[int]) -> None:
    data_streams = []
    pumps = []
    for index, port in enumerate(ports):
        headers = {channels.PORT: str(port), channels.REQUEST_ID: str(index)}
        error = await remote.open_stream({channels.STREAM_TYPE: channels.ERROR, **headers})
        data = await remote.open_stream({channels.STREAM_TYPE: channels.DATA, **headers})
        data_channel, error_channel = channels.port_channels(index)
        await _send(ws, data_channel, channels.port_prefix(port))
        await _send(ws, error_channel, channels.port_prefix(port))
        data_streams.append(data)
        pumps += [_out(data, ws, data_channel), _out(error, ws, error_channel)]

    async def incoming() -> None:
        async for message in ws:
            if not (raw := _payload(message)):
                continue
            channel, payload = channels.parse_channel_message(raw)
            if channel % 2 == 0 and channel // 2 < len(data_streams):
                await data_streams[channel // 2].write(payload)

    async def outgoing() -> None:
        await asyncio.gather(*pumps)

    reader = asyncio.create_task(incoming())
    writer = asyncio.create_task(outgoing())
    try:
        await asyncio.wait([reader, writer], return_when=asyncio.FIRST_COMPLETED)
    except spdy3.StreamReset:
        pass
    finally:
        writer.cancel()
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, spdy3.StreamReset, ConnectionError):
            await reader


def remote_protocols(action: str) -> list[str]:
    """What the SPDY session with the twin speaks for a WebSocket caller's action."""
    return [upgrade.PORTFORWARD_V1 if action == "portForward" else upgrade.REMOTECOMMAND_V4]


async def bridge(request: web.Request, action: str, remote: spdy3.Connection,
                 ports: list[int]) -> web.StreamResponse:
    """Answer the WebSocket upgrade (the twin's SPDY session is up), then bridge them."""
    offered = PORTFORWARD_PROTOCOLS if action == "portForward" else REMOTECOMMAND_PROTOCOLS
    ws = web.WebSocketResponse(protocols=offered, autoping=True, max_msg_size=0)
    try:
        await ws.prepare(request)
        if action == "portForward":
            await portforward(ws, remote, ports)
        else:
            await remotecommand(ws, remote, request.query)
    finally:
        await remote.close()
        await ws.close()
    return ws
