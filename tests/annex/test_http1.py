"""The keep-alive connection pool: connections reused while they may be, never after an answer
that forbids it, a timeout or a cancellation; a GET sent once more when its reused connection
was closed before any answer, nothing else; gzip answers decompressed; at most `limit`
connections. Against a scripted HTTP/1.1 server on loopback (plain TCP)."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp
import httptools
import pytest

from annex.http1 import ConnectionPool

Answer = Callable[["_Served"], Awaitable[bytes | None]]
"""What the server does with a request: the bytes it answers, or None to close at once."""


@dataclass
class _Served:
    connection: int
    """Which connection (0 for the first accepted) it came on."""
    index: int
    """Its place among all requests served."""
    method: str
    path: str


@dataclass
class _Server:
    answer: Answer
    closes_after: frozenset[int] = frozenset()
    """The requests after whose answer the server closes the connection (an idle timeout)."""
    connections: int = 0
    requests: list[_Served] = field(default_factory=list)
    open_connections: int = 0
    most_open: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        number = self.connections
        self.connections += 1
        self.open_connections += 1
        self.most_open = max(self.most_open, self.open_connections)
        done: list[tuple[str, str]] = []

        class Parsing:
            url = b""

            def on_url(self, url: bytes) -> None:
                self.url += url

            def on_message_complete(self) -> None:
                done.append((parser.get_method().decode(), self.url.decode()))
                self.url = b""

        parser = httptools.HttpRequestParser(Parsing())
        try:
            while data := await reader.read(65536):
                parser.feed_data(data)
                while done:
                    method, path = done.pop(0)
                    served = _Served(number, len(self.requests), method, path)
                    self.requests.append(served)
                    answer = await self.answer(served)
                    if answer is None:
                        return
                    writer.write(answer)
                    await writer.drain()
                    if served.index in self.closes_after:
                        return
        finally:
            self.open_connections -= 1
            writer.close()


def _ok(body: bytes = b"{}", *headers: str) -> bytes:
    head = "".join(f"{header}\r\n" for header in headers)
    return (f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{head}\r\n").encode() + body


def _request(method: str = "GET", path: str = "/") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: test\r\nContent-Length: 0\r\n\r\n".encode()


def _run(answer: Answer, scenario: Callable[[ConnectionPool, _Server], Awaitable[None]],
         closes_after: frozenset[int] = frozenset(), **pool: float) -> _Server:
    served = _Server(answer, closes_after)

    async def main() -> None:
        server = await asyncio.start_server(served.handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        connections = ConnectionPool("127.0.0.1", port, tls=None, server_hostname=None,
                                     limit=int(pool.pop("limit", 10)), **pool)
        try:
            await asyncio.wait_for(scenario(connections, served), 30)
        finally:
            connections.close()
            server.close()

    asyncio.run(main())
    return served


async def _always_ok(_: _Served) -> bytes:
    return _ok()


def test_sequential_requests_share_one_connection() -> None:
    async def scenario(pool: ConnectionPool, _server: _Server) -> None:
        for _ in range(5):
            assert (await pool.request(_request(), retry_closed=True, timeout=10)).status == 200

    assert _run(_always_ok, scenario).connections == 1


def test_an_answer_with_connection_close_is_the_connections_last() -> None:
    async def closing(_: _Served) -> bytes:
        return _ok(b"{}", "Connection: close")

    async def scenario(pool: ConnectionPool, _server: _Server) -> None:
        for _ in range(3):
            assert (await pool.request(_request(), retry_closed=True, timeout=10)).body == b"{}"

    assert _run(closing, scenario).connections == 3


def test_a_connection_idle_longer_than_keepalive_is_not_reused() -> None:
    async def scenario(pool: ConnectionPool, _server: _Server) -> None:
        for _ in range(3):
            await pool.request(_request(), retry_closed=True, timeout=10)

    assert _run(_always_ok, scenario, keepalive=0.0).connections == 3


def test_connections_idle_for_keepalive_are_closed_without_a_request() -> None:
    async def scenario(pool: ConnectionPool, served: _Server) -> None:
        await asyncio.gather(*(pool.request(_request(), retry_closed=True, timeout=10)
                               for _ in range(3)))
        assert served.open_connections == 3
        while served.open_connections:  # closed by the client, the pool left alone
            await asyncio.sleep(0.01)

    async def slow(_: _Served) -> bytes:
        await asyncio.sleep(0.05)
        return _ok()

    assert _run(slow, scenario, keepalive=0.2).connections == 3


def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    async def scenario(pool: ConnectionPool, served: _Server) -> None:
        await pool.request(_request("POST"), retry_closed=False, timeout=10)
        while served.open_connections:  # the server ends the connection, idle since
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # its end reaches the client
        assert (await pool.request(_request("POST"), retry_closed=False, timeout=10)).status == 200

    assert _run(_always_ok, scenario, closes_after=frozenset({0})).connections == 2


def _closed_on_second_request(served: _Served) -> Awaitable[bytes | None]:
    async def answer() -> bytes | None:
        # The first connection's second request finds it closed: an idle timeout's race.
        return None if served.connection == 0 and served.index == 1 else _ok()
    return answer()


def test_a_get_whose_reused_connection_closes_before_any_answer_is_sent_once_more() -> None:
    async def scenario(pool: ConnectionPool, _server: _Server) -> None:
        await pool.request(_request(), retry_closed=True, timeout=10)
        assert (await pool.request(_request(), retry_closed=True, timeout=10)).status == 200

    served = _run(_closed_on_second_request, scenario)
    assert [r.connection for r in served.requests] == [0, 0, 1]


def test_any_other_request_whose_connection_closes_fails_and_is_not_sent_again() -> None:
    async def scenario(pool: ConnectionPool, _server: _Server) -> None:
        await pool.request(_request("POST"), retry_closed=False, timeout=10)
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await pool.request(_request("POST"), retry_closed=False, timeout=10)
        assert (await pool.request(_request("POST"), retry_closed=False, timeout=10)).status == 200

    served = _run(_closed_on_second_request, scenario)
    assert [r.connection for r in served.requests] == [0, 0, 1]


async def _slow_first(request: _Served) -> bytes:
    if request.index == 0:
        await asyncio.sleep(1)
    return _ok()


def test_a_timed_out_request_closes_its_connection() -> None:
    async def scenario(pool: ConnectionPool, _server: _Server) -> None:
        with pytest.raises(TimeoutError):
            await pool.request(_request(), retry_closed=True, timeout=0.1)
        assert (await pool.request(_request(), retry_closed=True, timeout=10)).status == 200

    # the late answer never reaches the next request: it has a connection of its own
    assert _run(_slow_first, scenario).connections == 2


def test_a_request_cancelled_around_it_closes_its_connection() -> None:
    async def scenario(pool: ConnectionPool, _server: _Server) -> None:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):
                await pool.request(_request(), retry_closed=True, timeout=10)
        assert (await pool.request(_request(), retry_closed=True, timeout=10)).status == 200

    assert _run(_slow_first, scenario).connections == 2


def test_the_timeout_counts_the_wait_for_a_free_connection() -> None:
    async def scenario(pool: ConnectionPool, _server: _Server) -> None:
        busy = asyncio.create_task(pool.request(_request(), retry_closed=True, timeout=10))
        await asyncio.sleep(0)  # it takes the only connection
        with pytest.raises(TimeoutError):
            await pool.request(_request(), retry_closed=True, timeout=0.1)
        assert (await busy).status == 200

    # the second request was never sent: it timed out waiting for the connection
    assert len(_run(_slow_first, scenario, limit=1).requests) == 1


def test_a_gzip_answer_is_decompressed() -> None:
    async def gzipped(_: _Served) -> bytes:
        return _ok(gzip.compress(b'{"items": []}'), "Content-Encoding: gzip")

    async def scenario(pool: ConnectionPool, _server: _Server) -> None:
        response = await pool.request(_request(), retry_closed=True, timeout=10)
        assert response.body == b'{"items": []}'
        assert response.headers["content-encoding"] == "gzip"

    _run(gzipped, scenario)


def test_a_chunked_answer_comes_whole() -> None:
    async def chunked(_: _Served) -> bytes:
        return (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nRetry-After: 3\r\n\r\n"
                b"5\r\n{\"a\":\r\n2\r\n1}\r\n0\r\n\r\n")

    async def scenario(pool: ConnectionPool, _server: _Server) -> None:
        response = await pool.request(_request(), retry_closed=True, timeout=10)
        assert (response.body, response.headers["retry-after"]) == (b'{"a":1}', "3")

    _run(chunked, scenario)


def test_no_more_than_limit_connections_are_open_at_once() -> None:
    async def slow(_: _Served) -> bytes:
        await asyncio.sleep(0.05)
        return _ok()

    async def scenario(pool: ConnectionPool, _server: _Server) -> None:
        await asyncio.gather(*(pool.request(_request(), retry_closed=True, timeout=10)
                               for _ in range(12)))

    served = _run(slow, scenario, limit=3)
    assert (served.most_open, len(served.requests)) == (3, 12)


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _stream_scenario(parts: list[bytes | float], read_timeout: float = 10,
                     close_after: int | None = None
                     ) -> tuple[list[list[bytes]], BaseException | None]:
    """A stream whose server writes `parts` (a float: a pause of that long) then closes the
    connection; the batches of lines it gave and how it ended."""
    batches: list[list[bytes]] = []
    ended: list[BaseException | None] = [None]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        for part in parts:
            if isinstance(part, float):
                await asyncio.sleep(part)
            else:
                writer.write(part)
                await writer.drain()
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        pool = ConnectionPool("127.0.0.1", port, tls=None, server_hostname=None, limit=1)
        stream = await pool.stream(_request(), timeout=10)
        try:
            async for batch in stream.lines(read_timeout):
                batches.append(batch)
                if close_after is not None and len(batches) == close_after:
                    stream.close()
        except (TimeoutError, aiohttp.ClientError) as error:
            ended[0] = error
        finally:
            stream.close()
            server.close()

    asyncio.run(asyncio.wait_for(main(), 30))
    return batches, ended[0]


_STREAM_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


def test_a_stream_gives_whole_lines_as_they_come_until_its_answer_ends() -> None:
    batches, ended = _stream_scenario([
        _STREAM_HEAD, _chunk(b'{"a": 1}\n{"b"'), 0.05, _chunk(b': 2}\n'), 0.05,
        _chunk(b'{"c": 3}\n{"d": 4}\n'), b"0\r\n\r\n"])
    assert (batches, ended) == ([[b'{"a": 1}'], [b'{"b": 2}'], [b'{"c": 3}', b'{"d": 4}']],
                                None)


def test_a_stream_cut_short_fails_after_the_lines_it_had() -> None:
    batches, ended = _stream_scenario([_STREAM_HEAD, _chunk(b'{"a": 1}\n{"b"')])
    # the server closes (after the parts) without the last chunk: the stream was cut
    assert batches == [[b'{"a": 1}']]
    assert isinstance(ended, aiohttp.ServerDisconnectedError)


def test_a_stream_silent_for_its_read_timeout_fails() -> None:
    batches, ended = _stream_scenario([_STREAM_HEAD, _chunk(b"{}\n"), 5.0], read_timeout=0.2)
    assert (batches, type(ended)) == ([[b"{}"]], TimeoutError)


def test_a_stream_closed_here_just_ends() -> None:
    batches, ended = _stream_scenario([_STREAM_HEAD, _chunk(b"{}\n"), 5.0], close_after=1)
    assert (batches, ended) == ([[b"{}"]], None)


def test_a_stream_whose_answer_is_malformed_fails() -> None:
    batches, ended = _stream_scenario([_STREAM_HEAD, b"not a chunk size\r\n"])
    assert batches == [] and isinstance(ended, aiohttp.ClientPayloadError)


def test_a_line_over_many_reads_comes_whole() -> None:
    line = b'{"data": "%s"}' % (b"x" * 200_000)
    pieces = [line[start:start + 1000] for start in range(0, len(line), 1000)]
    batches, ended = _stream_scenario([_STREAM_HEAD, *map(_chunk, pieces), _chunk(b"\n{}"),
                                       b"0\r\n\r\n"])
    assert ([found for batch in batches for found in batch], ended) == ([line, b"{}"], None)
