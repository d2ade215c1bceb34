"""The asyncio SPDY connection in both roles over a real socket, and the upgrade handshake
helpers."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from spdy3 import Connection, StreamReset, upgrade
from spdy3.frames import CANCEL

DEADLINE = 10


@contextlib.asynccontextmanager
async def served_connection() -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter,
                                                     Connection]]:
    """A TCP client's raw streams, and the server's Connection on the other end."""
    accepted: asyncio.Queue[Connection] = asyncio.Queue()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.put_nowait(Connection(reader, writer, server=True))

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    reader, writer = await asyncio.open_connection("127.0.0.1",
                                                   server.sockets[0].getsockname()[1])
    served = await asyncio.wait_for(accepted.get(), DEADLINE)
    try:
        yield reader, writer, served
    finally:
        await served.close()
        writer.close()
        server.close()
        await server.wait_closed()


@pytest.fixture
async def pair() -> AsyncIterator[tuple[Connection, Connection]]:
    async with served_connection() as (reader, writer, served):
        client = Connection(reader, writer, server=False)
        yield client, served
        await client.close()


async def test_streams_carry_headers_and_data_both_ways(
        pair: tuple[Connection, Connection]) -> None:
    client, served = pair
    opened = await asyncio.wait_for(client.open_stream({"streamType": "stdin"}), DEADLINE)
    assert opened.id == 1
    incoming = await asyncio.wait_for(served.accept(), DEADLINE)
    assert incoming is not None and incoming.header("streamtype") == "stdin"
    await opened.write(b"ping" * 20000)  # several DATA frames
    await opened.close()
    assert await asyncio.wait_for(incoming.read_all(), DEADLINE) == b"ping" * 20000
    # the other direction stays open after the client's half-close
    await incoming.write(b"pong")
    await incoming.close()
    assert await asyncio.wait_for(opened.read_all(), DEADLINE) == b"pong"
    second = await asyncio.wait_for(client.open_stream({"streamType": "stdout"}), DEADLINE)
    assert second.id == 3


async def test_a_reset_stream_ends_reads_and_refuses_writes(
        pair: tuple[Connection, Connection]) -> None:
    client, served = pair
    opened = await asyncio.wait_for(client.open_stream({"streamType": "data"}), DEADLINE)
    incoming = await asyncio.wait_for(served.accept(), DEADLINE)
    assert incoming is not None
    incoming.reset()
    assert await asyncio.wait_for(opened.read(), DEADLINE) == b""
    assert opened.reset_status == CANCEL
    with pytest.raises(StreamReset):
        await opened.write(b"x")


async def test_pings_are_echoed_in_both_directions(pair: tuple[Connection, Connection]) -> None:
    client, served = pair
    await asyncio.wait_for(client.ping(), DEADLINE)
    await asyncio.wait_for(served.ping(), DEADLINE)


async def test_closing_the_connection_ends_every_stream(
        pair: tuple[Connection, Connection]) -> None:
    client, served = pair
    opened = await asyncio.wait_for(client.open_stream({"streamType": "stdout"}), DEADLINE)
    incoming = await asyncio.wait_for(served.accept(), DEADLINE)
    assert incoming is not None
    await served.close()
    assert await asyncio.wait_for(opened.read(), DEADLINE) == b""
    await asyncio.wait_for(client.wait_closed(), DEADLINE)
    assert await client.accept() is None
    with pytest.raises(StreamReset):
        await client.open_stream({"streamType": "stdin"})


async def test_a_peer_that_speaks_no_spdy_closes_the_connection() -> None:
    async with served_connection() as (_, peer, served):
        # a SPDY/2 PING: the version is not 3
        peer.write(b"\x80\x02\x00\x06\x00\x00\x00\x04\x00\x00\x00\x01")
        await asyncio.wait_for(served.wait_closed(), DEADLINE)
        assert served.error is not None


def test_negotiation_prefers_the_clients_order() -> None:
    server = upgrade.REMOTECOMMAND_PROTOCOLS
    assert upgrade.negotiate(["v4.channel.k8s.io", "channel.k8s.io"], server) == (
        "v4.channel.k8s.io")
    assert upgrade.negotiate(["channel.k8s.io", "v4.channel.k8s.io"], server) == "channel.k8s.io"
    assert upgrade.negotiate(["v9.channel.k8s.io"], server) is None
    assert upgrade.negotiation_error([], server) == (
        "unable to upgrade: X-Stream-Protocol-Version is required")


def test_upgrade_requests_are_recognised_case_insensitively() -> None:
    assert upgrade.is_spdy_upgrade({"Connection": "keep-alive, Upgrade", "Upgrade": "spdy/3.1"})
    assert not upgrade.is_spdy_upgrade({"Connection": "Upgrade", "Upgrade": "websocket"})
    assert not upgrade.is_spdy_upgrade([("Upgrade", "SPDY/3.1")])


async def test_read_response_leaves_the_upgraded_bytes_in_the_reader() -> None:
    reader = asyncio.StreamReader()
    reader.feed_data(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: SPDY/3.1\r\n"
                     b"X-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n\x80\x03")
    response = await upgrade.read_response(reader)
    assert response.status == 101
    assert response.header("x-stream-protocol-version") == "v4.channel.k8s.io"
    assert await reader.readexactly(2) == b"\x80\x03"
    reader = asyncio.StreamReader()
    reader.feed_data(b"HTTP/1.1 403 Forbidden\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"5\r\nhello\r\n0\r\n\r\n")
    response = await upgrade.read_response(reader)
    assert (response.status, response.body) == (403, b"hello")
