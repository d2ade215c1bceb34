"""SPDY/3 framing: byte layout of each frame, header-block compression with the SPDY/3
dictionary, and refusal of what is not SPDY/3."""

from __future__ import annotations

import struct
import zlib

import pytest

from spdy3 import frames
from spdy3.frames import FrameCodec, ProtocolError


def roundtrip(frame: frames.Frame) -> frames.Frame | None:
    sender, receiver = FrameCodec(), FrameCodec()
    raw = sender.encode(frame)
    assert frames.frame_length(raw[:8]) == len(raw) - 8
    return receiver.decode(raw[:8], raw[8:])


def test_the_dictionary_is_the_one_spdy3_peers_check() -> None:
    # a zlib stream names its dictionary by Adler-32 (DICTID): a peer's inflate refuses a
    # header block compressed with any other; draft 3 gives 1423 bytes
    assert len(frames.DICTIONARY) == 1423
    assert zlib.adler32(frames.DICTIONARY) == 0xE3C6A7C2
    assert frames.DICTIONARY.startswith(b"\x00\x00\x00\x07options\x00\x00\x00\x04head")


def test_control_frame_header_layout() -> None:
    raw = FrameCodec().encode(frames.RstStream(5, frames.CANCEL))
    # control bit + version 3, type 3, flags 0, length 8, stream id, status
    assert raw == struct.pack(">HHIII", 0x8003, 3, 8, 5, 5)
    assert FrameCodec().encode(frames.Ping(7)) == struct.pack(">HHII", 0x8003, 6, 4, 7)
    assert FrameCodec().encode(frames.GoAway(3, 1)) == struct.pack(">HHIII", 0x8003, 7, 8, 3, 1)


def test_data_frame_layout() -> None:
    raw = FrameCodec().encode(frames.Data(3, b"hello", frames.FLAG_FIN))
    assert raw == struct.pack(">II", 3, 0x01000005) + b"hello"
    assert roundtrip(frames.Data(3, b"hello", frames.FLAG_FIN)) == frames.Data(
        3, b"hello", frames.FLAG_FIN)


def test_syn_stream_header_block_is_compressed_and_lower_cased() -> None:
    codec = FrameCodec()
    frame = frames.SynStream(1, frames.normalize_headers({"streamType": "error"}))
    raw = codec.encode(frame)
    stream_id, associated, priority, slot = struct.unpack(">IIBB", raw[8:18])
    assert (stream_id, associated, priority, slot) == (1, 0, 0, 0)
    inflate = zlib.decompressobj(zdict=frames.DICTIONARY)
    block = inflate.decompress(raw[18:])
    assert block == struct.pack(">I", 1) + struct.pack(">I", 10) + b"streamtype" + struct.pack(
        ">I", 5) + b"error"
    assert roundtrip(frame) == frames.SynStream(1, {"streamtype": ["error"]})


def test_header_blocks_share_one_compression_context_per_direction() -> None:
    sender, receiver = FrameCodec(), FrameCodec()
    for stream_id, kind in ((1, "error"), (3, "stdin"), (5, "stdout")):
        raw = sender.encode(frames.SynStream(stream_id, {"streamtype": [kind]}))
        decoded = receiver.decode(raw[:8], raw[8:])
        assert decoded == frames.SynStream(stream_id, {"streamtype": [kind]})
    # a fresh decoder cannot read the third block alone: the context carries over
    raw = sender.encode(frames.SynReply(7, {"a": ["b"]}))
    with pytest.raises(ProtocolError):
        FrameCodec().decode(raw[:8], raw[8:])


def test_several_values_travel_nul_separated() -> None:
    frame = frames.SynReply(2, {"x-stream-protocol-version": ["v4.channel.k8s.io", "v3"]})
    assert roundtrip(frame) == frame


@pytest.mark.parametrize("frame", [
    frames.Settings([(0, 7, 65536)]), frames.WindowUpdate(3, 1000),
    frames.HeadersFrame(3, {"a": ["b"]}, frames.FLAG_FIN), frames.GoAway(9),
])
def test_other_frames_roundtrip(frame: frames.Frame) -> None:
    assert roundtrip(frame) == frame


def test_not_spdy3_is_refused() -> None:
    codec = FrameCodec()
    with pytest.raises(ProtocolError, match="version 2"):
        codec.decode(struct.pack(">HHI", 0x8002, 6, 4), struct.pack(">I", 1))
    with pytest.raises(ProtocolError, match="unknown control frame"):
        codec.decode(struct.pack(">HHI", 0x8003, 99, 0), b"")
    with pytest.raises(ProtocolError, match="stream 0"):
        codec.decode(struct.pack(">II", 0, 0), b"")
    with pytest.raises(ProtocolError, match="too short"):
        codec.decode(struct.pack(">HHI", 0x8003, 3, 2), b"\x00\x01")
