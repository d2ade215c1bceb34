"""The HTTP/1.1 upgrade to SPDY/3.1 as k8s.io/apimachinery/pkg/util/httpstream does it: the
client sends `Connection: Upgrade`, `Upgrade: SPDY/3.1` and the stream protocols it speaks in
`X-Stream-Protocol-Version` (most preferred first); the server picks the first client protocol
it supports and answers 101 with that protocol, or 403 listing what it accepts."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

UPGRADE = "SPDY/3.1"
HEADER_PROTOCOL_VERSION = "X-Stream-Protocol-Version"
HEADER_ACCEPTED_PROTOCOL_VERSIONS = "X-Accepted-Stream-Protocol-Versions"

# remotecommand (exec, attach) stream protocols, newest first
REMOTECOMMAND_V4 = "v4.channel.k8s.io"
REMOTECOMMAND_V3 = "v3.channel.k8s.io"
REMOTECOMMAND_V2 = "v2.channel.k8s.io"
REMOTECOMMAND_V1 = "channel.k8s.io"
REMOTECOMMAND_PROTOCOLS = (REMOTECOMMAND_V4, REMOTECOMMAND_V3, REMOTECOMMAND_V2, REMOTECOMMAND_V1)
# the WebSocket-only remotecommand protocol with a close signal per stream
REMOTECOMMAND_V5 = "v5.channel.k8s.io"
PORTFORWARD_V1 = "portforward.k8s.io"
# kubectl port-forward over WebSocket: SPDY frames tunneled in binary WebSocket messages
PORTFORWARD_TUNNEL = f"{UPGRADE}+{PORTFORWARD_V1}"


def _tokens(values: Iterable[str]) -> list[str]:
    return [token.strip().lower() for value in values for token in value.split(",")]


def is_spdy_upgrade(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> bool:
    """A request (or 101 answer) asking for SPDY/3.1 (names are case-insensitive)."""
    items = headers.items() if isinstance(headers, Mapping) else headers
    connection: list[str] = []
    upgrade: list[str] = []
    for name, value in items:
        if name.lower() == "connection":
            connection.append(value)
        elif name.lower() == "upgrade":
            upgrade.append(value)
    return "upgrade" in _tokens(connection) and UPGRADE.lower() in _tokens(upgrade)


def negotiate(client_protocols: Sequence[str], server_protocols: Sequence[str]) -> str | None:
    """httpstream.Handshake's choice: the first client protocol the server supports."""
    for protocol in client_protocols:
        if protocol in server_protocols:
            return protocol
    return None


def negotiation_error(client_protocols: Sequence[str], server_protocols: Sequence[str]) -> str:
    if not client_protocols:
        return f"unable to upgrade: {HEADER_PROTOCOL_VERSION} is required"
    return ("unable to upgrade: unable to negotiate protocol: client supports "
            f"[{' '.join(client_protocols)}], server accepts [{' '.join(server_protocols)}]")


def response_headers(protocol: str) -> list[tuple[str, str]]:
    """The headers of the 101 answer."""
    return [("Connection", "Upgrade"), ("Upgrade", UPGRADE),
            (HEADER_PROTOCOL_VERSION, protocol)]


@dataclass
class Response:
    status: int
    reason: str
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""  # read only when the upgrade failed

    def header(self, name: str) -> str:
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return ""


def request_bytes(method: str, target: str, host: str,
                  headers: Iterable[tuple[str, str]] = ()) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
    lines += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def upgrade_request_headers(protocols: Sequence[str]) -> list[tuple[str, str]]:
    return [("Connection", "Upgrade"), ("Upgrade", UPGRADE)] + [
        (HEADER_PROTOCOL_VERSION, protocol) for protocol in protocols]


async def read_response(reader: asyncio.StreamReader) -> Response:
    """An HTTP/1.1 response head; its body too unless it is a 101 (the bytes after a 101's head
    stay in the reader for the upgraded protocol)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    version_status = lines[0].split(" ", 2)
    if len(version_status) < 2 or not version_status[0].startswith("HTTP/"):
        raise ValueError(f"not an HTTP response: {lines[0]!r}")
    status = int(version_status[1])
    reason = version_status[2] if len(version_status) > 2 else ""
    headers = []
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers.append((name.strip(), value.strip()))
    response = Response(status, reason, headers)
    if status == 101:
        return response
    length = response.header("Content-Length")
    if length:
        response.body = await reader.readexactly(int(length))
    elif response.header("Transfer-Encoding").lower() == "chunked":
        response.body = await _read_chunked(reader)
    else:
        response.body = await reader.read()
    return response


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            return bytes(body)
        body += await reader.readexactly(size)
        await reader.readexactly(2)
