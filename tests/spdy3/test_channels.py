"""The remotecommand and port-forward conventions inside the streams."""

from __future__ import annotations

import json

from spdy3 import channels


def test_exit_status_is_metav1_status_with_an_exit_code_cause() -> None:
    raw = channels.exit_status(3, "exit status 3")
    status = json.loads(raw)
    assert status["status"] == "Failure" and status["reason"] == "NonZeroExitCode"
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]
    assert channels.parse_status(raw) == (
        3, "command terminated with non-zero exit code: exit status 3")
    assert channels.parse_status(channels.success_status()) == (0, "")
    assert channels.parse_status(b"") == (0, "")
    assert channels.parse_status(channels.failure_status("no such container")) == (
        None, "no such container")


def test_resize_messages_are_concatenated_terminal_sizes() -> None:
    raw = channels.resize_message(80, 24) + channels.resize_message(120, 40)
    assert raw.startswith(b'{"Width":80,"Height":24}')
    assert channels.parse_resize(raw) == [(80, 24), (120, 40)]


def test_websocket_channel_framing() -> None:
    assert channels.channel_message(channels.CHANNEL_STDOUT, b"hi") == b"\x01hi"
    assert channels.parse_channel_message(b"\x03{}") == (3, b"{}")
    assert channels.close_message(channels.CHANNEL_STDIN) == b"\xff\x00"
    assert channels.port_prefix(8080) == b"\x90\x1f"
    assert channels.port_channels(1) == (2, 3)
