"""What travels inside the streams of exec, attach and port-forward (client-go
tools/remotecommand and tools/portforward, kubelet's streaming server):

- SPDY streams are told apart by the `streamType` header; port-forward streams also carry
  `port` and `requestID`;
- the error stream carries a metav1.Status (v4): Success, or NonZeroExitCode with the exit code
  as an `ExitCode` cause;
- the resize stream carries JSON TerminalSize objects ({"Width":..,"Height":..});
- WebSocket (v4/v5.channel.k8s.io) messages start with one channel byte (0 stdin, 1 stdout,
  2 stderr, 3 error, 4 resize); v5 adds the close message [255, channel];
- WebSocket port-forward (portforward.k8s.io, v4.channel.k8s.io) uses two channels per port
  (data 2i, error 2i+1) whose first message starts with the port, little-endian uint16.
"""

from __future__ import annotations

import json
import struct
from typing import Any

STREAM_TYPE = "streamType"
STDIN = "stdin"
STDOUT = "stdout"
STDERR = "stderr"
ERROR = "error"
RESIZE = "resize"
# port-forward
DATA = "data"
PORT = "port"
REQUEST_ID = "requestID"

CHANNEL_STDIN = 0
CHANNEL_STDOUT = 1
CHANNEL_STDERR = 2
CHANNEL_ERROR = 3
CHANNEL_RESIZE = 4
CHANNEL_CLOSE = 255  # v5: the message [255, n] half-closes channel n
CHANNELS = {STDIN: CHANNEL_STDIN, STDOUT: CHANNEL_STDOUT, STDERR: CHANNEL_STDERR,
            ERROR: CHANNEL_ERROR, RESIZE: CHANNEL_RESIZE}

NON_ZERO_EXIT_CODE = "NonZeroExitCode"
EXIT_CODE = "ExitCode"


def _go_json(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def success_status() -> bytes:
    """The error stream's content when the command exited 0 (metav1.Status marshalled by
    encoding/json: no kind/apiVersion, an empty metadata)."""
    return _go_json({"metadata": {}, "status": "Success"})


def exit_status(code: int, message: str) -> bytes:
    """The error stream's content for a non-zero exit code."""
    return _go_json({
        "metadata": {}, "status": "Failure",
        "message": f"command terminated with non-zero exit code: {message}",
        "reason": NON_ZERO_EXIT_CODE,
        "details": {"causes": [{"reason": EXIT_CODE, "message": str(code)}]},
    })


def failure_status(message: str, reason: str = "InternalError", code: int = 500) -> bytes:
    """An error that is not an exit code (the container cannot run the command...)."""
    return _go_json({
        "metadata": {}, "status": "Failure", "message": message, "reason": reason,
        "details": {"causes": [{"message": message}]}, "code": code,
    })


def parse_status(raw: bytes) -> tuple[int | None, str]:
    """(exit code, message) from an error stream's content: (0, "") for Success or no status
    at all, (N, message) for NonZeroExitCode, (None, message) for any other failure."""
    if not raw.strip():
        return 0, ""
    try:
        status = json.loads(raw)
    except ValueError:
        return None, raw.decode(errors="replace")
    if not isinstance(status, dict) or status.get("status") == "Success":
        return 0, ""
    message = str(status.get("message", ""))
    if status.get("reason") == NON_ZERO_EXIT_CODE:
        for cause in (status.get("details") or {}).get("causes") or []:
            if cause.get("reason") == EXIT_CODE:
                try:
                    return int(cause.get("message", "")), message
                except ValueError:
                    break
    return None, message


def resize_message(width: int, height: int) -> bytes:
    return _go_json({"Width": width, "Height": height})


def parse_resize(raw: bytes) -> list[tuple[int, int]]:
    """The (width, height) sizes in a resize stream's bytes (concatenated JSON objects)."""
    decoder = json.JSONDecoder()
    text = raw.decode()
    sizes = []
    index = 0
    while index < len(text):
        if text[index].isspace():
            index += 1
            continue
        value, index = decoder.raw_decode(text, index)
        sizes.append((int(value.get("Width", 0)), int(value.get("Height", 0))))
    return sizes


def channel_message(channel: int, data: bytes) -> bytes:
    """A binary WebSocket message of the channel protocols."""
    return bytes([channel]) + data


def close_message(channel: int) -> bytes:
    """v5.channel.k8s.io's signal that a channel's writer is done."""
    return bytes([CHANNEL_CLOSE, channel])


def parse_channel_message(message: bytes) -> tuple[int, bytes]:
    if not message:
        raise ValueError("empty channel message")
    return message[0], message[1:]


def port_prefix(port: int) -> bytes:
    """The first bytes of each WebSocket port-forward channel."""
    return struct.pack("<H", port)


def port_channels(index: int) -> tuple[int, int]:
    """(data, error) channels of the index-th forwarded port."""
    return 2 * index, 2 * index + 1
