"""An asyncio SPDY/3.1 connection over an upgraded byte stream, in the client or the server role,
as Kubernetes' httpstream/spdy uses it: the client opens streams (odd ids) and waits for each
SYN_REPLY; the server replies to every SYN_STREAM at once and hands the stream to `accept`.
Streams half-close with a FIN, are reset with RST_STREAM; PINGs are echoed; GOAWAY ends the
connection. Flow control (WINDOW_UPDATE) is ignored, as spdystream ignores it."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Mapping
from typing import Protocol

from spdy3 import frames
from spdy3.frames import Frame, Headers, ProtocolError

# a write larger than this goes out as several DATA frames, so one stream cannot hold the
# connection for long
CHUNK = 32 * 1024


class ByteReader(Protocol):
    async def readexactly(self, n: int) -> bytes: ...


class ByteWriter(Protocol):
    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...


class StreamReset(Exception):
    """The stream was reset (by the peer or locally) or its connection is gone."""


class Stream:
    def __init__(self, connection: Connection, stream_id: int, headers: Headers) -> None:
        self.connection = connection
        self.id = stream_id
        self.headers = headers  # the SYN_STREAM's headers
        self.reply_headers: Headers = {}
        self.reset_status: int | None = None
        self._buffer = bytearray()
        self._remote_closed = False
        self._local_closed = False
        self._readable = asyncio.Event()
        self._replied: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def header(self, name: str) -> str:
        return frames.header(self.headers, name)

    @property
    def at_eof(self) -> bool:
        return not self._buffer and (self._remote_closed or self.reset_status is not None)

    async def read(self, n: int = -1) -> bytes:
        """Up to n bytes (all that is buffered when n < 0); b"" once the peer half-closed or
        the stream is reset."""
        while not self._buffer and not self._remote_closed and self.reset_status is None:
            self._readable.clear()
            await self._readable.wait()
        size = len(self._buffer) if n < 0 else min(n, len(self._buffer))
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    async def read_all(self) -> bytes:
        chunks = []
        while chunk := await self.read():
            chunks.append(chunk)
        return b"".join(chunks)

    async def write(self, data: bytes) -> None:
        if self.reset_status is not None:
            raise StreamReset(f"stream {self.id} was reset")
        if self._local_closed:
            raise StreamReset(f"stream {self.id} is closed for writing")
        for start in range(0, len(data), CHUNK):
            self.connection._send(frames.Data(self.id, data[start:start + CHUNK]))
        await self.connection._drain()

    async def close(self) -> None:
        """Half-close: the peer reads end of stream (an empty DATA frame with FIN)."""
        if self._local_closed or self.reset_status is not None:
            return
        self._local_closed = True
        self.connection._send(frames.Data(self.id, b"", frames.FLAG_FIN))
        self.connection._forget_if_done(self)
        with contextlib.suppress(ConnectionError):
            await self.connection._drain()

    def reset(self, status: int = frames.CANCEL) -> None:
        if self.reset_status is not None:
            return
        if not self.connection.closed:
            self.connection._send(frames.RstStream(self.id, status))
        self._on_reset(status)

    # ----------------------------------------------------------------- called by the connection
    def _feed(self, data: bytes) -> None:
        if data:
            self._buffer += data
        self._readable.set()

    def _feed_eof(self) -> None:
        self._remote_closed = True
        self._readable.set()

    def _on_reset(self, status: int) -> None:
        self.reset_status = status
        self._local_closed = self._remote_closed = True
        self._readable.set()
        if not self._replied.done():
            self._replied.set_exception(StreamReset(f"stream {self.id} was reset ({status})"))
        self.connection._streams.pop(self.id, None)

    @property
    def _done(self) -> bool:
        return self._local_closed and self._remote_closed


class Connection:
    def __init__(self, reader: ByteReader, writer: ByteWriter, *, server: bool) -> None:
        self.server = server
        self._reader = reader
        self._writer = writer
        self._codec = frames.FrameCodec()
        self._streams: dict[int, Stream] = {}
        self._next_stream_id = 2 if server else 1
        self._ping_ids = itertools.count(2 if server else 1, 2)
        self._pings: dict[int, asyncio.Future[None]] = {}
        self._incoming: asyncio.Queue[Stream | None] = asyncio.Queue()
        self._last_remote_id = 0
        self._closed = asyncio.Event()
        self.goaway_received = False
        self._goaway_sent = False
        self.error: Exception | None = None
        self._task = asyncio.get_running_loop().create_task(self._read_loop())

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    # ------------------------------------------------------------------------------- public
    async def open_stream(self, headers: Mapping[str, str | list[str]], *,
                          fin: bool = False) -> Stream:
        """Open a stream and wait for the peer's SYN_REPLY (StreamReset when it refuses)."""
        if self.closed or self.goaway_received:
            raise StreamReset("the connection is closed")
        stream_id = self._next_stream_id
        self._next_stream_id += 2
        normalized = frames.normalize_headers(headers)
        stream = Stream(self, stream_id, normalized)
        stream._local_closed = fin
        self._streams[stream_id] = stream
        self._send(frames.SynStream(stream_id, normalized, frames.FLAG_FIN if fin else 0))
        await self._drain()
        await stream._replied
        return stream

    async def accept(self) -> Stream | None:
        """The next stream the peer opened (already replied to); None once the connection is
        closed."""
        if self.closed and self._incoming.empty():
            return None
        return await self._incoming.get()

    async def ping(self) -> None:
        """Send a PING and wait for its echo."""
        ping_id = next(self._ping_ids)
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pings[ping_id] = waiter
        self._send(frames.Ping(ping_id))
        await self._drain()
        await waiter

    async def close(self) -> None:
        """GOAWAY, then close the transport; every stream reads end of stream."""
        if not self.closed and not self._goaway_sent:
            self._goaway_sent = True
            with contextlib.suppress(Exception):
                self._send(frames.GoAway(self._last_remote_id))
                await self._drain()
        self._shutdown()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task

    # ----------------------------------------------------------------------------- internal
    def _send(self, frame: Frame) -> None:
        if self.closed:
            raise StreamReset("the connection is closed")
        # encoding and writing in one step keeps header blocks in compression order
        self._writer.write(self._codec.encode(frame))

    async def _drain(self) -> None:
        try:
            await self._writer.drain()
        except (ConnectionError, RuntimeError) as error:
            self._shutdown()
            raise StreamReset(f"the connection is gone: {error}") from None

    def _forget_if_done(self, stream: Stream) -> None:
        if stream._done:
            self._streams.pop(stream.id, None)

    async def _read_loop(self) -> None:
        try:
            while True:
                head = await self._reader.readexactly(8)
                body = await self._reader.readexactly(frames.frame_length(head))
                frame = self._codec.decode(head, body)
                if frame is not None:
                    self._dispatch(frame)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        except ProtocolError as error:
            self.error = error
            with contextlib.suppress(Exception):
                self._send(frames.GoAway(self._last_remote_id, frames.GOAWAY_PROTOCOL_ERROR))
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        if self.closed:
            return
        self._closed.set()
        for stream in list(self._streams.values()):
            stream._on_reset(frames.CANCEL)
        for waiter in self._pings.values():
            if not waiter.done():
                waiter.set_exception(StreamReset("the connection is closed"))
        self._incoming.put_nowait(None)
        with contextlib.suppress(Exception):
            self._writer.close()

    def _dispatch(self, frame: Frame) -> None:
        if isinstance(frame, frames.Data):
            data_stream = self._streams.get(frame.stream_id)
            if data_stream is None:
                self._send(frames.RstStream(frame.stream_id, frames.INVALID_STREAM))
                return
            data_stream._feed(frame.data)
            if frame.flags & frames.FLAG_FIN:
                data_stream._feed_eof()
                self._forget_if_done(data_stream)
        elif isinstance(frame, frames.SynStream):
            self._on_syn_stream(frame)
        elif isinstance(frame, frames.SynReply | frames.HeadersFrame):
            stream = self._streams.get(frame.stream_id)
            if stream is None:
                return
            stream.reply_headers.update(frame.headers)
            if isinstance(frame, frames.SynReply) and not stream._replied.done():
                stream._replied.set_result(None)
            if frame.flags & frames.FLAG_FIN:
                stream._feed_eof()
                self._forget_if_done(stream)
        elif isinstance(frame, frames.RstStream):
            stream = self._streams.get(frame.stream_id)
            if stream is not None:
                stream._on_reset(frame.status)
        elif isinstance(frame, frames.Ping):
            if frame.ping_id % 2 == (0 if self.server else 1):
                waiter = self._pings.pop(frame.ping_id, None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(None)
            else:
                self._send(frame)  # the peer's ping: echo it
        elif isinstance(frame, frames.GoAway):
            self.goaway_received = True
        # SETTINGS and WINDOW_UPDATE carry nothing this connection acts on

    def _on_syn_stream(self, frame: frames.SynStream) -> None:
        expected_parity = 1 if self.server else 0
        if frame.stream_id % 2 != expected_parity or frame.stream_id <= self._last_remote_id:
            self._send(frames.RstStream(frame.stream_id, frames.PROTOCOL_ERROR))
            return
        self._last_remote_id = frame.stream_id
        if self._goaway_sent:
            self._send(frames.RstStream(frame.stream_id, frames.REFUSED_STREAM))
            return
        stream = Stream(self, frame.stream_id, frame.headers)
        stream._replied.set_result(None)
        self._streams[frame.stream_id] = stream
        if frame.flags & frames.FLAG_FIN:
            stream._remote_closed = True
        if frame.flags & frames.FLAG_UNIDIRECTIONAL:
            stream._local_closed = True
        # httpstream/spdy replies to every stream it accepts, with no headers
        self._send(frames.SynReply(frame.stream_id, {}))
        self._incoming.put_nowait(stream)
