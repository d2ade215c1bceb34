"""SPDY/3.1 as Kubernetes uses it for exec, attach and port-forward, with the upgrade handshake
and the stream/channel conventions of the kubelet API. A library: it imports nothing of the
project (both the product and the simulator use it)."""

from spdy3.connection import Connection, Stream, StreamReset
from spdy3.frames import DICTIONARY, ProtocolError

__all__ = ["DICTIONARY", "Connection", "ProtocolError", "Stream", "StreamReset"]
