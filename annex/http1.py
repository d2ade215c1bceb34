"""HTTP/1.1 to the API server: requests on keep-alive connections, watches as streams of lines.

`ClusterApi` sends every request answered at once (creates, updates, patches, gets, lists,
deletes) through a `ConnectionPool`, and each watch as a `Stream` on a connection of its own,
which hands over all lines a read brought; the kubelet API's streams (exec, attach,
port-forward: WebSocket and SPDY) stay on aiohttp. Why not aiohttp, or another client, for the
API servers, and what each choice here saves, measured: docs/decisions/0001-own-http1-client.md.
The parsing is httptools' (llhttp, as Node.js), the transport and TLS the event loop's.

What it does, as Go's net/http does for client-go:
- at most `limit` connections at once (aiohttp's TCPConnector limit); a connection idle for
  `keepalive` seconds is closed (aiohttp's 15 s), so a burst's connections do not stay open,
  and well before an API server drops it (kube-apiserver: 90 s), so a request rarely meets a
  connection closing under it;
- a GET that finds its reused connection closed before any answer is sent once more on a new
  one (Go retries such replayable requests); any other request fails (`Disconnected`) and
  its caller decides, as the server may have applied it;
- a connection is reused only after a complete answer that allows it (keep-alive, no
  `Connection: close`); a timeout, a cancellation or a malformed answer closes it;
- `Accept-Encoding: gzip`, as Go's transport: the API server compresses answers over 128 KiB
  (lists); they are decompressed here.
- a stream has a connection of its own, outside `limit`, never reused; nothing read on it for
  its read timeout (the watch's own timeout and some) fails it, as aiohttp's `sock_read`;
- through a proxy (`annex.proxies`), every connection is a tunnel that HTTP CONNECT opens, TLS
  to the server inside it, as Go's transport does for https.
Errors are annex's own (`annex.transport_errors`: `ConnectFailed` and its proxy and TLS kinds,
`Disconnected`, `MalformedAnswer`) and `TimeoutError`.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import socket
import ssl
import time
import zlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import httptools

from annex.proxies import Proxy
from annex.transport_errors import (
    CertificateRejected,
    ConnectFailed,
    Disconnected,
    MalformedAnswer,
    ProxyRefused,
    TLSFailed,
)

P = TypeVar("P", bound=asyncio.Protocol)

KEEPALIVE = 15.0
"""Seconds a connection may wait idle and still be reused (aiohttp's keepalive_timeout)."""


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    """Names in lower case; a repeated header keeps its last value."""
    body: bytes


class _Connection(asyncio.Protocol):
    """A client connection whose answers httptools parses, calling the subclass's callbacks;
    a malformed answer or the connection's loss is `_broken`."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self._headers: dict[str, str] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TLS transport is no asyncio.Transport subclass, though it is one in all but name
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as error:
            self._broken(MalformedAnswer(f"malformed answer: {error}"))
            self.close()

    def eof_received(self) -> bool:
        return False  # the transport closes; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self._broken(Disconnected(
            f"the server closed the connection{f': {exc}' if exc else ''}"))

    def on_header(self, name: bytes, value: bytes) -> None:
        # httptools gathers a header split over two reads: one call a header
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def _broken(self, error: Exception) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class _Exchange(_Connection):
    """One connection: one request at a time, its answer parsed as it arrives."""

    def __init__(self) -> None:
        super().__init__()
        self.answer: asyncio.Future[Response] | None = None
        self.closed = False
        self.idle_since = 0.0
        self.answered = False
        """Whether any byte of the current answer came (a GET is retried only if not)."""
        self._body: list[bytes] = []

    def data_received(self, data: bytes) -> None:
        self.answered = True
        super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        super().connection_lost(exc)

    # httptools callbacks

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        body = b"".join(self._body)
        if self._headers.get("content-encoding") == "gzip":
            body = zlib.decompress(body, 16 + zlib.MAX_WBITS)
        response = Response(self.parser.get_status_code(), self._headers, body)
        self._headers, self._body = {}, []
        if not self.parser.should_keep_alive():
            self.close()
        if self.answer is not None and not self.answer.done():
            self.answer.set_result(response)

    # use

    def send(self, request: bytes) -> asyncio.Future[Response]:
        assert self.transport is not None
        self.answered = False
        self.answer = asyncio.get_running_loop().create_future()
        if self.closed or self.transport.is_closing():  # lost before this request: none comes
            self._broken(Disconnected("the server closed the connection"))
        else:
            self.transport.write(request)
        return self.answer

    def usable(self) -> bool:
        return not self.closed and self.transport is not None and not self.transport.is_closing()

    def _broken(self, error: Exception) -> None:
        if self.answer is not None and not self.answer.done():
            self.answer.set_exception(error)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class Stream(_Connection):
    """A request whose answer comes as a stream of lines on a connection of its own (a watch):
    `lines` gives them as they come, in batches, until the answer ends; `close` ends it from
    this side (then `lines` just ends, as if the server had)."""

    def __init__(self) -> None:
        super().__init__()
        self.status = 0
        self.head: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._partial: list[bytes] = []
        """The pieces of the line begun and not yet ended (an event may span many reads)."""
        self._lines: list[bytes] = []
        self._waiter: asyncio.Future[None] | None = None
        self._ended = False
        self._error: Exception | None = None

    def _broken(self, error: Exception) -> None:
        # Before the answer's end: the server went, or cut the stream short (after its end, or
        # once closed here, `_end` keeps how it ended).
        self._end(error)

    # httptools callbacks

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        if not self.head.done():
            self.head.set_result(None)

    def on_body(self, body: bytes) -> None:
        first, newline, rest = body.partition(b"\n")
        self._partial.append(first)
        if newline:
            *complete, last = rest.split(b"\n")
            self._lines.append(b"".join(self._partial))
            self._lines.extend(complete)
            self._partial = [last]
            self._wake()

    def on_message_complete(self) -> None:
        line = b"".join(self._partial)
        if line:
            self._lines.append(line)
        self._partial = []
        self._end(None)

    # use

    async def lines(self, read_timeout: float) -> AsyncIterator[list[bytes]]:
        """The answer's lines as they come (a batch each time the connection had some), until
        it ends; TimeoutError when nothing came for `read_timeout` seconds, the errors of
        `ConnectionPool.request` when the connection breaks before the end."""
        loop = asyncio.get_running_loop()
        while True:
            if self._lines:
                lines, self._lines = self._lines, []
                yield lines
                continue
            if self._ended:
                if self._error is not None:
                    raise self._error
                return
            waiter = self._waiter = loop.create_future()
            timer = loop.call_at(loop.time() + read_timeout, _time_out, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self._waiter = None

    async def body(self, read_timeout: float) -> bytes:
        """The whole rest of the answer (an error's Status)."""
        return b"\n".join([line async for batch in self.lines(read_timeout) for line in batch])

    def close(self) -> None:
        self._end(None)
        if self.transport is not None:
            self.transport.close()

    def _end(self, error: Exception | None) -> None:
        if not self._ended:
            self._ended, self._error = True, error
        if not self.head.done():  # ended before the status came: by the server, or closed here
            if error is None:
                self.head.cancel()
            else:
                self.head.set_exception(error)
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


async def _answer(exchange: _Exchange, request: bytes, deadline: float) -> Response:
    """The answer to `request` on `exchange`; TimeoutError at `deadline`. A timer on the
    answer rather than `asyncio.timeout` around the await, which costs a context manager and
    the task's cancellation and its undoing a request (decision 0001)."""
    answer = exchange.send(request)
    timer = asyncio.get_running_loop().call_at(deadline, _time_out, answer)
    try:
        return await answer
    finally:
        timer.cancel()


def _time_out(waited: asyncio.Future[Any]) -> None:
    """A deadline passed: what was waited for (an answer, a stream's next read) fails."""
    if not waited.done():
        waited.set_exception(TimeoutError())


class ConnectionPool:
    """Keep-alive connections to one server, on one event loop."""

    def __init__(self, host: str, port: int, *, tls: ssl.SSLContext | None,
                 server_hostname: str | None, limit: int, keepalive: float = KEEPALIVE,
                 proxy: Proxy | None = None) -> None:
        self._host, self._port = host, port
        self._proxy = proxy
        self._tls, self._server_hostname = tls, server_hostname
        self._keepalive = keepalive
        self._slots = asyncio.Semaphore(max(1, limit))
        self._idle: collections.deque[_Exchange] = collections.deque()
        """Oldest first: requests take the newest, expiry closes from the oldest."""
        self._expiry: asyncio.TimerHandle | None = None
        self._closed = False

    async def request(self, request: bytes, *, retry_closed: bool, timeout: float) -> Response:
        """Send one whole request (`request_bytes`) and return its answer; TimeoutError when
        the answer is not in within `timeout` seconds, a free connection waited for included."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if self._slots.locked():  # all connections busy: wait for one, within the deadline
            async with asyncio.timeout_at(deadline):
                await self._slots.acquire()
        else:
            await self._slots.acquire()
        try:
            return await self._exchange(request, retry_closed, deadline)
        finally:
            self._slots.release()

    async def _exchange(self, request: bytes, retry_closed: bool, deadline: float) -> Response:
        exchange, reused = self._reusable(), True
        if exchange is None:
            exchange, reused = await self._connect(deadline, _Exchange), False
        try:
            response = await _answer(exchange, request, deadline)
        except Disconnected:
            exchange.close()
            if not (reused and retry_closed and not exchange.answered):
                raise
            # closed while idle: once more, on a new one
            exchange = await self._connect(deadline, _Exchange)
            try:
                response = await _answer(exchange, request, deadline)
            except BaseException:
                exchange.close()
                raise
        except BaseException:  # a timeout, a cancellation: the answer may still come
            exchange.close()
            raise
        if not exchange.usable() or self._closed:
            exchange.close()
        else:
            exchange.idle_since = time.monotonic()
            self._idle.append(exchange)
            if self._expiry is None:
                self._expiry = asyncio.get_running_loop().call_later(
                    self._keepalive, self._expire)
        return response

    def _expire(self) -> None:
        """Close the connections idle for `keepalive` seconds; look again when the next is."""
        self._expiry = None
        oldest = time.monotonic() - self._keepalive
        while self._idle and (self._idle[0].idle_since <= oldest or not self._idle[0].usable()):
            self._idle.popleft().close()
        if self._idle:
            self._expiry = asyncio.get_running_loop().call_later(
                self._idle[0].idle_since - oldest, self._expire)

    def _reusable(self) -> _Exchange | None:
        oldest = time.monotonic() - self._keepalive
        while self._idle:
            exchange = self._idle.pop()  # the most recently used: the least likely to be closing
            if exchange.usable() and exchange.idle_since >= oldest:
                return exchange
            exchange.close()
        return None

    async def stream(self, request: bytes, *, timeout: float) -> Stream:
        """Send `request` on a connection of its own, outside the pool's limit (a watch holds
        it for minutes), and return its answer's stream once the status and headers are in
        (within `timeout` seconds, the connection made included)."""
        deadline = asyncio.get_running_loop().time() + timeout
        stream = await self._connect(deadline, Stream)
        try:
            assert stream.transport is not None  # connected
            stream.transport.write(request)
            async with asyncio.timeout_at(deadline):
                await stream.head
        except BaseException:
            stream.close()
            raise
        return stream

    async def _connect(self, deadline: float, protocol: Callable[[], P]) -> P:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(deadline):
                hostname = self._server_hostname if self._tls else None
                if self._proxy is None:
                    _, connected = await loop.create_connection(
                        protocol, self._host, self._port, ssl=self._tls,
                        server_hostname=hostname)
                else:
                    tunnel = await open_tunnel(self._proxy, self._host, self._port)
                    _, connected = await loop.create_connection(
                        protocol, sock=tunnel, ssl=self._tls, server_hostname=hostname)
        except ConnectFailed:  # a proxy's refusal, which says it all
            raise
        except OSError as error:  # refused, unreachable, a TLS failure, the deadline passed
            kind = (CertificateRejected if isinstance(error, ssl.SSLCertVerificationError)
                    else TLSFailed if isinstance(error, ssl.SSLError) else ConnectFailed)
            through = f" through proxy {self._proxy.host}:{self._proxy.port}" if self._proxy else ""
            cause = ("timed out" if isinstance(error, TimeoutError)
                     else error.strerror or str(error) or type(error).__name__)
            why = f"cannot connect to {self._host}:{self._port}{through}: {cause}"
            raise (kind(why) if error.errno is None else kind(error.errno, why)) from error
        return connected

    def close(self) -> None:
        """Close the idle connections now, the others once their answer is in."""
        self._closed = True
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        while self._idle:
            self._idle.pop().close()


async def open_tunnel(proxy: Proxy, host: str, port: int) -> socket.socket:
    """A connected socket to `host`:`port` through `proxy`, once it answered CONNECT with 2xx;
    ProxyRefused when it refused, OSError when it could not be reached."""
    loop = asyncio.get_running_loop()
    address = (f"[{host}]" if ":" in host else host) + f":{port}"
    infos = await loop.getaddrinfo(proxy.host, proxy.port, type=socket.SOCK_STREAM)
    family, kind, protocol, _, where = infos[0]
    sock = socket.socket(family, kind, protocol)
    try:
        sock.setblocking(False)
        await loop.sock_connect(sock, where)
        authorization = (f"Proxy-Authorization: {proxy.authorization}\r\n"
                         if proxy.authorization else "")
        await loop.sock_sendall(sock, (f"CONNECT {address} HTTP/1.1\r\nHost: {address}\r\n"
                                       f"{authorization}\r\n").encode("latin-1"))
        answer = b""
        while b"\r\n\r\n" not in answer:  # the proxy says nothing more before we speak
            data = await loop.sock_recv(sock, 4096)
            if not data or len(answer) > 65536:
                raise ProxyRefused(errno.ECONNREFUSED,
                                   f"proxy {proxy.host}:{proxy.port} closed the tunnel "
                                   f"to {address} before answering CONNECT")
            answer += data
        status = answer.split(b"\r\n", 1)[0].decode("latin-1")
        words = status.split(" ")
        if len(words) < 2 or not words[1].startswith("2"):
            raise ProxyRefused(errno.ECONNREFUSED, f"proxy {proxy.host}:{proxy.port} refused "
                               f"CONNECT {address}: {status}")
    except BaseException:
        sock.close()
        raise
    return sock
