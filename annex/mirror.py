"""Thread-safe in-memory copies of watched objects, fed by the watches' event
handlers and read by the reconcilers (which run on other threads).

Objects are kept JSON-encoded (orjson): about a seventh of the memory of the decoded dicts, and
decoding a copy for a reader is several times faster than `copy.deepcopy` — with 10,000 pods on
both sides both matter. orjson rather than msgpack: a running pod encodes
in 1 µs against 3.5 and decodes in 4 µs against 6.5, and compressed they are the same size.

And compressed (zstd) with the mirror's first object as a raw-content dictionary: objects of
one kind share most of their keys and many of their values, so a running pod kept in 2.1 KB
takes about 140 bytes at level 1. zstd rather than deflate with the same dictionary: a
compression and decompression take 40 % of the instructions (63,000 against 153,000 for such a
pod) and the result is a quarter smaller (138 bytes against 188),
docs/decisions/0002-compressed-mirrors.md. At
`LEVEL` -1 rather than 1: zstd's fast mode leaves literals unencoded (no Huffman table built an
object), and a restart compresses every object it lists (13.6 % of its samples at N = 10,000
with level 1).

The objects changed last are kept uncompressed until newer changes push them out (`HOT_BYTES`
of them a mirror): a pod changes a dozen times within seconds of its creation and is read
between those changes, and each change compressed and each read decompressed cost as much again
as the rest of the mirror's work. An object is compressed once it has settled instead.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from typing import Any

import orjson
import zstandard

Key = tuple[str, str]
"""(namespace, name); namespace is "" for cluster-scoped objects."""


def key_of(obj: dict[str, Any]) -> Key:
    metadata = obj.get("metadata") or {}
    # Interned: thousands of keys share a few namespaces, each decoded as a string of its own.
    return (sys.intern(str(metadata.get("namespace") or "")), str(metadata.get("name") or ""))


def _packed(obj: dict[str, Any]) -> bytes:
    """The object without metadata.managedFields (often its bulk, never read here; a write that
    omits them keeps the server's), encoded."""
    metadata = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    return orjson.dumps({**obj, "metadata": metadata})


def _unpacked(data: bytes) -> dict[str, Any]:
    obj: dict[str, Any] = orjson.loads(data)
    return obj


def discard(by_namespace: dict[str, dict[str, Any]], key: Key) -> None:
    """Forget `key` in a namespace → name → value map, and its namespace once empty."""
    names = by_namespace.get(key[0])
    if names is not None:
        names.pop(key[1], None)
        if not names:
            del by_namespace[key[0]]


_MAX_DICTIONARY = 32 * 1024

LEVEL = -1
"""zstd's level: a running pod (1.6 KB of JSON) compressed in 4.1 µs against 8.9 at level 1 and
decompressed in 1.2 against 3.8, into 118 bytes against 95; an Event 4.3 and 1.1 µs against 8.3
and 3.0, 136 bytes against 110."""

HOT_BYTES = 256 * 1024
"""The encoded size of the objects a mirror keeps uncompressed, the ones changed last. Offloading
3,000 pods, the agent compressed 4.9 objects a pod (10.9 with none kept) and decompressed 0.6
(12.2); 1 MiB: 4.5 and 0.6; 4 MiB: 3.1 and 0.1, and 30 MiB more RSS."""

_ENCODED = ord("{")
"""The first byte of an object encoded but not compressed (a zstd frame starts with 0x28)."""


class _Codec(threading.local):
    """One mirror's zstd contexts for the calling thread (a context serves one thread at a
    time; watches, reconcilers and their loops each have their own)."""

    def __init__(self, dictionary: zstandard.ZstdCompressionDict) -> None:
        # No checksum and no dictionary id: a few bytes an object, which never leaves memory.
        self.compressor = zstandard.ZstdCompressor(level=LEVEL, dict_data=dictionary,
                                                   write_checksum=False, write_dict_id=False)
        self.decompressor = zstandard.ZstdDecompressor(dict_data=dictionary)


class Mirror:
    """The last seen state of one kind's objects. Readers get copies: never shared mutable."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._codec: _Codec | None = None
        """Set by the first object stored, packed, as the dictionary: fixed from then on (see
        the module docstring)."""
        self._objects: dict[str, dict[str, bytes]] = {}
        """Namespace → name → the object, packed: no key tuple kept for each object (there are
        hundreds of thousands at N = 50,000; `keys` makes them for its caller). Compressed, or
        only encoded while it is in `_hot`."""
        self._hot: OrderedDict[Key, int] = OrderedDict()
        """The keys whose objects are only encoded, changed last at the end, with their sizes."""
        self._hot_bytes = 0
        self._seen: set[Key] | None = None
        self.version = 0
        """Changes applied so far: what is derived from the whole mirror can be kept per
        version (read it before reading the mirror)."""

    def apply(self, event_type: str | None, obj: dict[str, Any]) -> Key:
        """Record a watch event (DELETED removes; any other type stores); returns the key."""
        key = key_of(obj)
        packed = _packed(obj) if event_type != "DELETED" else b""
        if packed and self._codec is None:
            self._start_codec(packed)
        with self._lock:
            self.version += 1
            self._cool(key)
            if event_type == "DELETED":
                discard(self._objects, key)
            else:
                self._objects.setdefault(key[0], {})[key[1]] = packed
                self._hot[key] = len(packed)
                self._hot_bytes += len(packed)
                if self._seen is not None:
                    self._seen.add(key)
            settled = self._settled()
        for settled_key, encoded in settled:
            self._compress(settled_key, encoded)
        return key

    def _start_codec(self, packed: bytes) -> None:
        with self._lock:
            if self._codec is None:
                dictionary = zstandard.ZstdCompressionDict(
                    packed[:_MAX_DICTIONARY], dict_type=zstandard.DICT_TYPE_RAWCONTENT)
                dictionary.precompute_compress(level=LEVEL)
                self._codec = _Codec(dictionary)

    def _cool(self, key: Key) -> None:
        """`key` leaves the hot set (under the lock)."""
        size = self._hot.pop(key, None)
        if size is not None:
            self._hot_bytes -= size

    def _settled(self) -> list[tuple[Key, bytes]]:
        """The objects pushed out of the hot set, still encoded only (under the lock)."""
        settled = []
        while self._hot_bytes > HOT_BYTES and len(self._hot) > 1:
            key, size = self._hot.popitem(last=False)
            self._hot_bytes -= size
            settled.append((key, self._objects[key[0]][key[1]]))
        return settled

    def _compress(self, key: Key, encoded: bytes) -> None:
        """Store `key`'s object compressed, unless it changed meanwhile (outside the lock: the
        readers do not wait for a compression)."""
        assert self._codec is not None  # set before the first object was stored
        # zstd answers in a buffer of the input's size shrunk in place, which keeps the input's
        # size allocated (50,000 pods: 62.5 MiB against 9.2): kept as a copy of its own.
        compressed = bytes(memoryview(self._codec.compressor.compress(encoded)))
        with self._lock:
            names = self._objects.get(key[0])
            if names is not None and names.get(key[1]) is encoded:
                names[key[1]] = compressed

    def _decoded(self, data: bytes) -> dict[str, Any]:
        if data[0] == _ENCODED:
            return _unpacked(data)
        assert self._codec is not None  # set before the first object was stored
        return _unpacked(self._codec.decompressor.decompress(data))

    def start_relist(self) -> None:
        """A new watch is about to list everything again: remember what it shows."""
        with self._lock:
            self._seen = set()

    def finish_relist(self) -> list[Key]:
        """The new listing is complete: forget (and return) what it did not show — objects
        deleted while no watch was running never get a DELETED event."""
        return list(self.end_relist())

    def end_relist(self) -> dict[Key, dict[str, Any]]:
        """`finish_relist`, with the last state kept of each object forgotten."""
        with self._lock:
            seen, self._seen = self._seen or set(), None
            stale = {(namespace, name): data for namespace, names in self._objects.items()
                     for name, data in names.items() if (namespace, name) not in seen}
            for key in stale:
                discard(self._objects, key)
                self._cool(key)
            self.version += 1
        return {key: self._decoded(data) for key, data in stale.items()}

    def get(self, key: Key) -> dict[str, Any] | None:
        with self._lock:
            names = self._objects.get(key[0])
            found = names.get(key[1]) if names is not None else None
        return self._decoded(found) if found is not None else None

    def has(self, key: Key) -> bool:
        """Whether it holds `key` (without decoding the object)."""
        with self._lock:
            names = self._objects.get(key[0])
            return names is not None and key[1] in names

    def values(self) -> list[dict[str, Any]]:
        with self._lock:
            found = [data for names in self._objects.values() for data in names.values()]
        return [self._decoded(data) for data in found]

    def size(self) -> int:
        """How many objects it holds (without making their keys)."""
        with self._lock:
            return sum(len(names) for names in self._objects.values())

    def keys(self) -> list[Key]:
        with self._lock:
            return [(namespace, name) for namespace, names in self._objects.items()
                    for name in names]
