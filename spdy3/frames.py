"""SPDY/3.1 frames as Kubernetes speaks them (github.com/moby/spdystream, draft 3 of the SPDY
protocol): the 8-byte frame header, the control frames, DATA, and header blocks compressed with
zlib and the SPDY/3 dictionary (one compression context per direction for the whole
connection)."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

VERSION = 3
MAX_DATA_LENGTH = (1 << 24) - 1

# control frame types
SYN_STREAM = 1
SYN_REPLY = 2
RST_STREAM = 3
SETTINGS = 4
PING = 6
GOAWAY = 7
HEADERS = 8
WINDOW_UPDATE = 9

FLAG_FIN = 0x01
FLAG_UNIDIRECTIONAL = 0x02

# RST_STREAM status codes
PROTOCOL_ERROR = 1
INVALID_STREAM = 2
REFUSED_STREAM = 3
UNSUPPORTED_VERSION = 4
CANCEL = 5
INTERNAL_ERROR = 6
FLOW_CONTROL_ERROR = 7
STREAM_IN_USE = 8
STREAM_ALREADY_CLOSED = 9

# GOAWAY status codes
GOAWAY_OK = 0
GOAWAY_PROTOCOL_ERROR = 1
GOAWAY_INTERNAL_ERROR = 2

_DICTIONARY_WORDS = (
    "options head post put delete trace accept accept-charset accept-encoding accept-language "
    "accept-ranges age allow authorization cache-control connection content-base "
    "content-encoding content-language content-length content-location content-md5 "
    "content-range content-type date etag expect expires from host if-match if-modified-since "
    "if-none-match if-range if-unmodified-since last-modified location max-forwards pragma "
    "proxy-authenticate proxy-authorization range referer retry-after server te trailer "
    "transfer-encoding upgrade user-agent vary via warning www-authenticate method get status"
).split() + ["200 OK", "version", "HTTP/1.1", "url", "public", "set-cookie", "keep-alive",
             "origin"]
_DICTIONARY_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request"
    "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented"
    "503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 "
    "Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,"
    "application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age="
    "gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
# The SPDY/3 header compression dictionary (draft 3, section 2.6.10.1): length-prefixed words,
# then a plain tail. A peer's inflate refuses any other dictionary.
DICTIONARY = b"".join(struct.pack(">I", len(w)) + w.encode() for w in _DICTIONARY_WORDS) + (
    _DICTIONARY_TAIL.encode())

Headers = dict[str, list[str]]


class ProtocolError(Exception):
    """The peer sent something that is not SPDY/3."""


@dataclass
class SynStream:
    stream_id: int
    headers: Headers
    flags: int = 0
    associated_to: int = 0
    priority: int = 0


@dataclass
class SynReply:
    stream_id: int
    headers: Headers
    flags: int = 0


@dataclass
class HeadersFrame:
    stream_id: int
    headers: Headers
    flags: int = 0


@dataclass
class RstStream:
    stream_id: int
    status: int


@dataclass
class Settings:
    # (flags, id, value)
    entries: list[tuple[int, int, int]] = field(default_factory=list)
    flags: int = 0


@dataclass
class Ping:
    ping_id: int


@dataclass
class GoAway:
    last_good_stream_id: int
    status: int = GOAWAY_OK


@dataclass
class WindowUpdate:
    stream_id: int
    delta: int


@dataclass
class Data:
    stream_id: int
    data: bytes
    flags: int = 0


Frame = (SynStream | SynReply | HeadersFrame | RstStream | Settings | Ping | GoAway
         | WindowUpdate | Data)


def normalize_headers(headers: Mapping[str, str | Iterable[str]]) -> Headers:
    """Lower-case names (SPDY/3 requires it) with a list of values each."""
    out: Headers = {}
    for name, values in headers.items():
        listed = [values] if isinstance(values, str) else list(values)
        out.setdefault(name.lower(), []).extend(listed)
    return out


def header(headers: Headers, name: str) -> str:
    """The first value of a header, "" when absent (names are case-insensitive)."""
    values = headers.get(name.lower())
    return values[0] if values else ""


def _encode_header_block(headers: Headers) -> bytes:
    parts = [struct.pack(">I", len(headers))]
    for name, values in headers.items():
        raw_name = name.lower().encode()
        # several values of one name travel NUL-separated
        raw_value = b"\x00".join(v.encode() for v in values)
        parts += [struct.pack(">I", len(raw_name)), raw_name,
                  struct.pack(">I", len(raw_value)), raw_value]
    return b"".join(parts)


def _decode_header_block(raw: bytes) -> Headers:
    try:
        (count,) = struct.unpack_from(">I", raw, 0)
        offset = 4
        headers: Headers = {}
        for _ in range(count):
            (length,) = struct.unpack_from(">I", raw, offset)
            name = raw[offset + 4:offset + 4 + length].decode().lower()
            offset += 4 + length
            (length,) = struct.unpack_from(">I", raw, offset)
            value = raw[offset + 4:offset + 4 + length].decode()
            offset += 4 + length
            headers.setdefault(name, []).extend(value.split("\x00"))
    except (struct.error, UnicodeDecodeError) as error:
        raise ProtocolError(f"malformed header block: {error}") from None
    if offset != len(raw):
        raise ProtocolError("header block has trailing bytes")
    return headers


class FrameCodec:
    """Encodes and decodes the frames of one connection: its two zlib contexts live as long as
    the connection (each header block ends with a sync flush, as spdystream's framer does)."""

    def __init__(self) -> None:
        self._deflate = zlib.compressobj(zlib.Z_BEST_COMPRESSION, zdict=DICTIONARY)
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)

    def _compress(self, headers: Headers) -> bytes:
        block = _encode_header_block(headers)
        return self._deflate.compress(block) + self._deflate.flush(zlib.Z_SYNC_FLUSH)

    def _decompress(self, raw: bytes) -> Headers:
        try:
            block = self._inflate.decompress(raw)
        except zlib.error as error:
            raise ProtocolError(f"header block does not inflate: {error}") from None
        return _decode_header_block(block)

    def encode(self, frame: Frame) -> bytes:
        if isinstance(frame, Data):
            if not 0 < frame.stream_id < 1 << 31 or len(frame.data) > MAX_DATA_LENGTH:
                raise ValueError("invalid DATA frame")
            return struct.pack(">II", frame.stream_id,
                               frame.flags << 24 | len(frame.data)) + frame.data
        kind, flags, body = self._control_body(frame)
        return struct.pack(">HHI", 0x8000 | VERSION, kind, flags << 24 | len(body)) + body

    def _control_body(self, frame: Frame) -> tuple[int, int, bytes]:
        if isinstance(frame, SynStream):
            block = self._compress(frame.headers)
            return SYN_STREAM, frame.flags, struct.pack(
                ">IIBB", frame.stream_id, frame.associated_to, (frame.priority & 7) << 5,
                0) + block
        if isinstance(frame, SynReply):
            block = self._compress(frame.headers)
            return SYN_REPLY, frame.flags, struct.pack(">I", frame.stream_id) + block
        if isinstance(frame, HeadersFrame):
            block = self._compress(frame.headers)
            return HEADERS, frame.flags, struct.pack(">I", frame.stream_id) + block
        if isinstance(frame, RstStream):
            return RST_STREAM, 0, struct.pack(">II", frame.stream_id, frame.status)
        if isinstance(frame, Settings):
            body = struct.pack(">I", len(frame.entries)) + b"".join(
                struct.pack(">II", flag << 24 | ident, value)
                for flag, ident, value in frame.entries)
            return SETTINGS, frame.flags, body
        if isinstance(frame, Ping):
            return PING, 0, struct.pack(">I", frame.ping_id)
        if isinstance(frame, GoAway):
            return GOAWAY, 0, struct.pack(">II", frame.last_good_stream_id, frame.status)
        if isinstance(frame, WindowUpdate):
            return WINDOW_UPDATE, 0, struct.pack(">II", frame.stream_id, frame.delta)
        raise TypeError(f"not a SPDY frame: {frame!r}")

    def decode(self, head: bytes, body: bytes) -> Frame | None:
        """One frame from its 8-byte header and its body; None for a control frame type SPDY/3
        defines but Kubernetes does not use (NOOP, CREDENTIAL), which is skipped."""
        first, flags_length = struct.unpack(">II", head)
        flags = flags_length >> 24
        if not first & 0x80000000:
            stream_id = first & 0x7FFFFFFF
            if stream_id == 0:
                raise ProtocolError("DATA frame for stream 0")
            return Data(stream_id, body, flags)
        version = (first >> 16) & 0x7FFF
        kind = first & 0xFFFF
        if version != VERSION:
            raise ProtocolError(f"unsupported SPDY version {version}")
        try:
            return self._decode_control(kind, flags, body)
        except struct.error:
            raise ProtocolError(f"control frame {kind} is too short") from None

    def _decode_control(self, kind: int, flags: int, body: bytes) -> Frame | None:
        if kind == SYN_STREAM:
            stream_id, associated, priority, _slot = struct.unpack_from(">IIBB", body)
            return SynStream(stream_id & 0x7FFFFFFF, self._decompress(body[10:]), flags,
                             associated & 0x7FFFFFFF, priority >> 5)
        if kind in (SYN_REPLY, HEADERS):
            (stream_id,) = struct.unpack_from(">I", body)
            headers = self._decompress(body[4:])
            if kind == SYN_REPLY:
                return SynReply(stream_id & 0x7FFFFFFF, headers, flags)
            return HeadersFrame(stream_id & 0x7FFFFFFF, headers, flags)
        if kind == RST_STREAM:
            stream_id, status = struct.unpack_from(">II", body)
            return RstStream(stream_id & 0x7FFFFFFF, status)
        if kind == SETTINGS:
            (count,) = struct.unpack_from(">I", body)
            entries = []
            for index in range(count):
                flag_id, value = struct.unpack_from(">II", body, 4 + 8 * index)
                entries.append((flag_id >> 24, flag_id & 0xFFFFFF, value))
            return Settings(entries, flags)
        if kind == PING:
            return Ping(struct.unpack_from(">I", body)[0])
        if kind == GOAWAY:
            last, status = struct.unpack_from(">II", body)
            return GoAway(last & 0x7FFFFFFF, status)
        if kind == WINDOW_UPDATE:
            stream_id, delta = struct.unpack_from(">II", body)
            return WindowUpdate(stream_id & 0x7FFFFFFF, delta & 0x7FFFFFFF)
        if kind in (5, 10):  # NOOP (SPDY/2), CREDENTIAL: nothing Kubernetes sends
            return None
        raise ProtocolError(f"unknown control frame type {kind}")


def frame_length(head: bytes) -> int:
    """The body length an 8-byte frame header announces."""
    return int(struct.unpack(">I", head[4:8])[0]) & 0xFFFFFF
