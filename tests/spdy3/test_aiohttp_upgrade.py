"""Taking an aiohttp server's connection over for SPDY after a 101: what the client sends before
the server is ready reaches the session (or, when the upgrade is declined, HTTP)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from spdy3 import Connection, upgrade
from spdy3.aiohttp_upgrade import claim, switch_protocols

DEADLINE = 10


class Server:
    """An aiohttp server whose /upgrade handler claims the connection, then waits until the
    test lets it go on (GET /go, on another connection) before it answers: the window in which
    a handler does its other work (dials the kubelet, the remote API server)."""

    def __init__(self) -> None:
        self.claimed = asyncio.Event()
        self.go = asyncio.Event()
        self.switch = True
        self.received: asyncio.Queue[tuple[str, bytes]] = asyncio.Queue()
        self.port = 0

    async def upgrade(self, request: web.Request) -> web.StreamResponse:
        claim(request)
        self.claimed.set()
        await self.go.wait()
        if not self.switch:
            return web.Response(status=403, text="no\n")
        reader, writer = await switch_protocols(request, web.StreamResponse(
            status=101, headers=upgrade.response_headers(upgrade.PORTFORWARD_V1)))
        session = Connection(reader, writer, server=True)
        while (stream := await session.accept()) is not None:
            self.received.put_nowait((stream.header("streamType"), await stream.read_all()))
            await stream.write(b"pong")
            await stream.close()
        return web.Response()  # not sent: the 101 is

    async def let_go(self, request: web.Request) -> web.StreamResponse:
        self.go.set()
        return web.Response(text="go\n")

    async def plain(self, request: web.Request) -> web.StreamResponse:
        return web.Response(text="plain\n")

    async def release(self) -> None:
        """Let the upgrade handler go on, once everything the client wrote before this is in
        the server's hands: this request comes on a new connection, which the server accepts
        and reads only after the readable upgrade connection."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        writer.write(upgrade.request_bytes("GET", "/go", "test"))
        await asyncio.wait_for(upgrade.read_response(reader), DEADLINE)
        writer.close()


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    served = Server()
    app = web.Application()
    app.router.add_post("/upgrade", served.upgrade)
    app.router.add_get("/go", served.let_go)
    app.router.add_get("/plain", served.plain)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    served.port = runner.addresses[0][1]
    yield served
    served.go.set()
    await runner.cleanup()


class _SessionAfter101:
    """An optimistic client's reader: SPDY starts once the 101's head is read."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader
        self.response = asyncio.ensure_future(upgrade.read_response(reader))

    async def readexactly(self, n: int) -> bytes:
        await self.response
        return await self.reader.readexactly(n)


class _WriteSeen:
    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.written = asyncio.Event()

    def write(self, data: bytes) -> None:
        self.writer.write(data)
        self.written.set()

    async def drain(self) -> None:
        await self.writer.drain()

    def close(self) -> None:
        self.writer.close()


UPGRADE_REQUEST = upgrade.request_bytes(
    "POST", "/upgrade", "test",
    upgrade.upgrade_request_headers([upgrade.PORTFORWARD_V1]) + [("Content-Length", "0")])


async def test_a_stream_opened_before_the_101_reaches_the_session(server: Server) -> None:
    reader, raw_writer = await asyncio.open_connection("127.0.0.1", server.port)
    raw_writer.write(UPGRADE_REQUEST)
    await asyncio.wait_for(server.claimed.wait(), DEADLINE)
    writer = _WriteSeen(raw_writer)
    after_101 = _SessionAfter101(reader)
    client = Connection(after_101, writer, server=False)
    opening = asyncio.ensure_future(client.open_stream({"streamType": "data"}))
    await asyncio.wait_for(writer.written.wait(), DEADLINE)  # the SYN_STREAM is on its way
    await server.release()  # ... and in the server's hands before it switches
    stream = await asyncio.wait_for(opening, DEADLINE)
    assert (await after_101.response).status == 101
    await stream.write(b"ping")
    await stream.close()
    assert await asyncio.wait_for(server.received.get(), DEADLINE) == ("data", b"ping")
    assert await asyncio.wait_for(stream.read_all(), DEADLINE) == b"pong"
    await client.close()


async def test_a_stream_opened_on_the_101_reaches_the_session(server: Server) -> None:
    server.go.set()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(UPGRADE_REQUEST)
    assert (await asyncio.wait_for(upgrade.read_response(reader), DEADLINE)).status == 101
    client = Connection(reader, writer, server=False)
    stream = await asyncio.wait_for(client.open_stream({"streamType": "error"}), DEADLINE)
    await stream.close()
    assert await asyncio.wait_for(server.received.get(), DEADLINE) == ("error", b"")
    assert await asyncio.wait_for(stream.read_all(), DEADLINE) == b"pong"
    await client.close()


async def test_what_follows_a_declined_upgrade_is_read_as_http(server: Server) -> None:
    server.switch = False
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(UPGRADE_REQUEST)
    await asyncio.wait_for(server.claimed.wait(), DEADLINE)
    writer.write(upgrade.request_bytes("GET", "/plain", "test"))
    await server.release()
    declined = await asyncio.wait_for(upgrade.read_response(reader), DEADLINE)
    assert (declined.status, declined.body) == (403, b"no\n")
    plain = await asyncio.wait_for(upgrade.read_response(reader), DEADLINE)
    assert (plain.status, plain.body) == (200, b"plain\n")
    writer.close()


async def test_the_writer_reports_a_gone_client_on_drain() -> None:
    ended: asyncio.Future[tuple[bool, BaseException | None]] = (
        asyncio.get_running_loop().create_future())

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(status=101, headers=upgrade.response_headers("x"))
        reader, writer = await switch_protocols(request, response)
        at_eof = await reader.read() == b""
        writer.write(b"late")  # like asyncio's StreamWriter: dropped, not raised
        try:
            await writer.drain()
        except ConnectionResetError as error:
            ended.set_result((at_eof, error))
        else:
            ended.set_result((at_eof, None))
        return response

    app = web.Application()
    app.router.add_post("/upgrade", handler)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", runner.addresses[0][1])
        writer.write(UPGRADE_REQUEST)
        assert (await asyncio.wait_for(upgrade.read_response(reader), DEADLINE)).status == 101
        writer.close()
        at_eof, error = await asyncio.wait_for(ended, DEADLINE)
        assert at_eof
        assert isinstance(error, ConnectionResetError)
    finally:
        await runner.cleanup()
