"""The keep-alive connection pool: connections reused while they may be, never after an answer
that forbids it, a timeout or a cancellation; a GET sent once more when its reused connection
was closed before any answer, nothing else; gzip answers decompressed; at most `limit`
connections; over TLS, a server whose certificate does not verify refused before any request,
and every failure to connect one of annex's transport errors. Against a scripted HTTP/1.1 server
on loopback (plain TCP, or TLS with a trustme CA's certificate)."""

from __future__ import annotations

import asyncio
import errno
import gzip
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import httptools
import pytest
import trustme

from annex.http1 import ConnectionPool
from annex.transport_errors import (
    CertificateRejected,
    ConnectFailed,
    Disconnected,
    MalformedAnswer,
    TLSFailed,
    TransportError,
)

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


@dataclass(frozen=True)
class _Tls:
    server: ssl.SSLContext
    client: ssl.SSLContext
    server_hostname: str
    """The name the client checks the server's certificate against."""


def _tls(server_hostname: str = "localhost", *, client_trusts_the_ca: bool = True) -> _Tls:
    """A server certificate for 127.0.0.1 and localhost, from a trustme CA; a client trusting
    that CA, or another one."""
    authority = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1", "localhost").configure_cert(server)
    client = ssl.create_default_context()
    (authority if client_trusts_the_ca else trustme.CA()).configure_trust(client)
    return _Tls(server, client, server_hostname)


def _run(answer: Answer, scenario: Callable[[ConnectionPool, _Server], Awaitable[None]],
         closes_after: frozenset[int] = frozenset(), tls: _Tls | None = None,
         **pool: float) -> _Server:
    served = _Server(answer, closes_after)

    async def main() -> None:
        server = await asyncio.start_server(served.handle, "127.0.0.1", 0,
                                            ssl=tls.server if tls else None)
        port = server.sockets[0].getsockname()[1]
        connections = ConnectionPool("127.0.0.1", port, tls=tls.client if tls else None,
                                     server_hostname=tls.server_hostname if tls else None,
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
        with pytest.raises(Disconnected):
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
        except (TimeoutError, TransportError) as error:
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
    assert isinstance(ended, Disconnected)


def test_a_stream_silent_for_its_read_timeout_fails() -> None:
    batches, ended = _stream_scenario([_STREAM_HEAD, _chunk(b"{}\n"), 5.0], read_timeout=0.2)
    assert (batches, type(ended)) == ([[b"{}"]], TimeoutError)


def test_a_stream_closed_here_just_ends() -> None:
    batches, ended = _stream_scenario([_STREAM_HEAD, _chunk(b"{}\n"), 5.0], close_after=1)
    assert (batches, ended) == ([[b"{}"]], None)


def test_a_stream_whose_answer_is_malformed_fails() -> None:
    batches, ended = _stream_scenario([_STREAM_HEAD, b"not a chunk size\r\n"])
    assert batches == [] and isinstance(ended, MalformedAnswer)


def test_a_line_over_many_reads_comes_whole() -> None:
    line = b'{"data": "%s"}' % (b"x" * 200_000)
    pieces = [line[start:start + 1000] for start in range(0, len(line), 1000)]
    batches, ended = _stream_scenario([_STREAM_HEAD, *map(_chunk, pieces), _chunk(b"\n{}"),
                                       b"0\r\n\r\n"])
    assert ([found for batch in batches for found in batch], ended) == ([line, b"{}"], None)


def test_requests_over_tls_are_answered_on_one_kept_connection() -> None:
    async def scenario(pool: ConnectionPool, _server: _Server) -> None:
        for _ in range(2):
            assert (await pool.request(_request(), retry_closed=True, timeout=10)).status == 200

    served = _run(_always_ok, scenario, tls=_tls())
    assert [r.connection for r in served.requests] == [0, 0]


def test_a_stream_over_tls_gives_its_lines() -> None:
    async def lines(_: _Served) -> bytes:
        return _STREAM_HEAD + _chunk(b'{"a": 1}\n{"b": 2}\n') + b"0\r\n\r\n"

    got: list[bytes] = []

    async def scenario(pool: ConnectionPool, _server: _Server) -> None:
        stream = await pool.stream(_request(), timeout=10)
        try:
            got.extend([line async for batch in stream.lines(10) for line in batch])
        finally:
            stream.close()

    _run(lines, scenario, tls=_tls())
    assert got == [b'{"a": 1}', b'{"b": 2}']


@pytest.mark.parametrize(("tls", "why"), [
    (_tls(client_trusts_the_ca=False), "unable to get local issuer certificate"),
    (_tls("elsewhere.invalid"), "Hostname mismatch"),
], ids=["signed by a CA the client does not trust", "naming another host"])
def test_a_server_certificate_that_does_not_verify_is_rejected_before_any_request(
        tls: _Tls, why: str) -> None:
    failures: list[BaseException] = []

    async def scenario(pool: ConnectionPool, _server: _Server) -> None:
        for send in (lambda: pool.request(_request(), retry_closed=True, timeout=10),
                     lambda: pool.stream(_request(), timeout=10)):
            with pytest.raises(CertificateRejected) as raised:
                await send()
            failures.append(raised.value)

    served = _run(_always_ok, scenario, tls=tls)
    assert served.requests == []
    for failure in failures:  # never sent: a connection failure, naming the server
        assert isinstance(failure, TLSFailed) and isinstance(failure, ConnectFailed)
        assert str(failure).startswith("[Errno 1] cannot connect to 127.0.0.1:"), failure
        assert why in str(failure)
        assert isinstance(failure.__cause__, ssl.SSLCertVerificationError)


def test_a_plain_http_server_answering_a_tls_client_is_a_tls_failure() -> None:
    async def plain(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)  # the ClientHello, answered as a plain server answers it
        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(plain, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        pool = ConnectionPool("127.0.0.1", port, tls=_tls().client,
                              server_hostname="localhost", limit=1)
        try:
            with pytest.raises(TLSFailed) as raised:
                await pool.request(_request(), retry_closed=True, timeout=10)
        finally:
            pool.close()
            server.close()
        assert not isinstance(raised.value, CertificateRejected)
        assert "WRONG_VERSION_NUMBER" in str(raised.value)

    asyncio.run(asyncio.wait_for(main(), 30))


def test_a_refused_connection_is_a_connect_failure_naming_the_server() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    async def main() -> None:
        pool = ConnectionPool("127.0.0.1", port, tls=None, server_hostname=None, limit=1)
        with pytest.raises(ConnectFailed) as raised:
            await pool.request(_request(), retry_closed=True, timeout=10)
        assert raised.value.errno == errno.ECONNREFUSED
        assert str(raised.value).startswith(f"[Errno {errno.ECONNREFUSED}] cannot connect to "
                                            f"127.0.0.1:{port}: ")
        assert not isinstance(raised.value, TLSFailed)

    asyncio.run(asyncio.wait_for(main(), 30))
