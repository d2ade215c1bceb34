"""In-memory object storage: a cluster-wide monotonic resourceVersion, event history, watchers.

Every write serializes the object once; GET, LIST and every watcher share those bytes. Stored
objects are read-only: writers always store a new dict.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from sortedcontainers import SortedDict

from kubesim.errors import (
    ETCD_CLIENT_MAX_MESSAGE_BYTES,
    ETCD_MAX_REQUEST_BYTES,
    etcd_message_too_large,
    etcd_request_too_large,
    expired,
)

StorageKey = tuple[str, str]  # (group, plural)
ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"

def dumps(value: Any) -> bytes:
    """Compact JSON, as the API server writes it (orjson: a stored object is encoded once per
    write, and that was the server's largest single cost)."""
    return orjson.dumps(value)


def storage_order(namespace: str, name: str) -> str:
    """The position of an object in lists: etcd's key order, "namespace/name" byte-wise
    (so "a-b/x" comes before "a/x")."""
    return f"{namespace}/{name}" if namespace else name


@dataclass(slots=True)
class Stored:
    """One version of an object: the dict and its JSON, with and without apiVersion/kind."""

    obj: dict[str, Any]
    rv: int
    item: bytes = b""  # JSON without apiVersion/kind: how built-in lists carry their items
    full: bytes = b""  # JSON with apiVersion/kind first
    _lines: dict[str, bytes] = field(default_factory=dict)

    @classmethod
    def of(cls, obj: dict[str, Any], rv: int) -> Stored:
        body = {k: v for k, v in obj.items() if k != "apiVersion" and k != "kind"}
        item = dumps(body)
        head = dumps({"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind")})
        full = head[:-1] + (b"," + item[1:] if len(item) > 2 else b"}")
        return cls(obj, rv, item, full)

    def watch_line(self, event_type: str) -> bytes:
        """The watch-stream line for this object, built once per event type."""
        line = self._lines.get(event_type)
        if line is None:
            line = b'{"type":"' + event_type.encode() + b'","object":' + self.full + b"}\n"
            self._lines[event_type] = line
        return line

    @property
    def namespace(self) -> str:
        return str(self.obj["metadata"].get("namespace", ""))

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])


@dataclass(slots=True)
class Event:
    type: str
    key: StorageKey
    rv: int
    new: Stored
    old: Stored | None


Filter = Callable[[dict[str, Any]], bool]
Listener = Callable[[Event], None]
Ident = tuple[StorageKey, str, str]  # (storage key, namespace, name)
Idents = list[Ident]
StoredList = list[Stored]
KeyList = list[StorageKey]


class Watcher:
    """A registered watch: receives (type, Stored) pairs for its kind, namespace and selectors.

    An update that moves an object into the selection is ADDED, out of it DELETED (carrying the
    previous content at the new resourceVersion, as the watch cache does).
    """

    def __init__(self, key: StorageKey, namespace: str, matches: Filter | None) -> None:
        self.key = key
        self.namespace = namespace
        self.matches = matches
        self.queue: asyncio.Queue[tuple[str, Stored] | None] = asyncio.Queue()
        # like cacheWatcher: only events newer than the version the watch started from (matters
        # when a client asks for a version the server has not reached yet)
        self.since = 0

    def translate(self, event: Event) -> tuple[str, Stored] | None:
        if self.namespace and event.new.namespace != self.namespace:
            return None
        if self.matches is None:
            return event.type, event.new
        new_passes = self.matches(event.new.obj)
        if event.type != MODIFIED:
            return (event.type, event.new) if new_passes else None
        assert event.old is not None
        old_passes = self.matches(event.old.obj)
        if new_passes:
            return (MODIFIED if old_passes else ADDED), event.new
        if old_passes:
            return DELETED, _at_version(event.old, event.rv)
        return None

    def offer(self, event: Event) -> None:
        if event.rv <= self.since:
            return
        translated = self.translate(event)
        if translated is not None:
            self.queue.put_nowait(translated)

    def close(self) -> None:
        self.queue.put_nowait(None)


def _at_version(stored: Stored, rv: int) -> Stored:
    obj = dict(stored.obj)
    obj["metadata"] = {**obj["metadata"], "resourceVersion": str(rv)}
    return Stored.of(obj, rv)


COMPACTION_INTERVAL = 300.0
"""kube-apiserver's --etcd-compaction-interval: each compaction forgets the revisions before
the one the previous compaction saw, so a list's continue token lives 5 to 10 minutes however
busy the cluster (the watch history is the watch cache's: `History`)."""

EVENT_FRESH_SECONDS = 75.0
HISTORY_LOWER_BOUND = 100
HISTORY_UPPER_BOUND = 100 * 1024
"""The watch cache's eventFreshDuration, DefaultLowerBoundCapacity, DefaultUpperBoundCapacity
(apiserver/pkg/storage/cacher, the same since 1.19)."""


class History:
    """One resource's watch history, as kube-apiserver's watch cache keeps it: a ring whose
    capacity starts at 100 events, doubles when full while its oldest event is under 75 s old
    and halves when full while its newest quarter is older than that (resizeCacheLocked),
    within 100 and 102,400. So a busy resource keeps at least 75 s of events (up to the
    bound), a quiet one at least its last 100, however busy the other resources are."""

    def __init__(self, lower: int = HISTORY_LOWER_BOUND,
                 upper: int = HISTORY_UPPER_BOUND) -> None:
        self.events: deque[tuple[Event, float]] = deque()
        self.capacity = self.lower = lower
        self.upper = max(lower, upper)
        self.oldest_kept = 0
        """0 until an event is dropped, then the resourceVersion of the oldest one kept."""

    def add(self, event: Event, now: float) -> None:
        if len(self.events) >= self.capacity:
            if now - self.events[0][1] < EVENT_FRESH_SECONDS:
                self.capacity = min(self.capacity * 2, self.upper)
            elif now - self.events[-max(1, self.capacity // 4)][1] > EVENT_FRESH_SECONDS:
                self.capacity = max(self.capacity // 2, self.lower)
        while len(self.events) >= self.capacity:
            self.events.popleft()
            self.oldest_kept = self.events[0][0].rv if self.events else event.rv
        self.events.append((event, now))

    def since(self, rv: int) -> list[Event]:
        """The events after `rv`; 410 when some of them are gone (getAllEventsSinceLocked)."""
        if self.oldest_kept and rv < self.oldest_kept - 1:
            raise expired(f"too old resource version: {rv} ({self.oldest_kept - 1})")
        return [event for event, _ in self.events if event.rv > rv]


class Store:
    def __init__(self, history: tuple[int, int] = (HISTORY_LOWER_BOUND, HISTORY_UPPER_BOUND)
                 ) -> None:
        self._objects: dict[StorageKey, dict[tuple[str, str], Stored]] = {}
        # Per kind, (namespace, name) in etcd key order: a list page is a range read from its
        # continue key (O(page), as etcd's), not a sort and scan of every object.
        self._ordered: dict[StorageKey, SortedDict] = {}
        self._history_bounds = history
        self._histories: dict[StorageKey, History] = {}
        self._rv = 0
        self._compacted = 0  # every history holds every event of its resource after this
        self._etcd_compacted = 0  # continue tokens of older list snapshots are expired
        self._compaction = (time.monotonic() + COMPACTION_INTERVAL, 0)
        """When the next compaction runs, and the revision it compacts to."""
        self._watchers: dict[StorageKey, list[Watcher]] = {}
        # in-process observers of every event of every kind (the garbage collector's graph
        # builder sees all resources, custom ones included, as its informers do)
        self._listeners: list[Listener] = []
        # indexes the garbage collector needs without scanning everything
        self._by_uid: dict[str, tuple[StorageKey, str, str]] = {}
        self._by_owner: dict[str, set[tuple[StorageKey, str, str]]] = {}

    @property
    def resource_version(self) -> int:
        return self._rv

    # reads ------------------------------------------------------------------------------
    def get(self, key: StorageKey, namespace: str, name: str) -> Stored | None:
        return self._objects.get(key, {}).get((namespace, name))

    def list(self, key: StorageKey, namespace: str = "") -> list[Stored]:
        """Objects of a kind (in a namespace, or all), in etcd key order (`storage_order`)."""
        return list(self.iterate(key, namespace))

    def iterate(self, key: StorageKey, namespace: str = "", after: str = "") -> Iterator[Stored]:
        """Like `list`, lazily, from just after the `storage_order` position `after`."""
        ordered = self._ordered.get(key)
        if not ordered:
            return
        bucket = self._objects[key]
        prefix = f"{namespace}/" if namespace else ""
        start = max(after, prefix) if after else prefix
        for position in ordered.irange(minimum=start or None, inclusive=(not after, True)):
            if prefix and not position.startswith(prefix):
                return
            stored = bucket.get(ordered[position])
            if stored is not None:
                yield stored

    def count_after(self, key: StorageKey, namespace: str, after: str) -> int:
        """How many objects `iterate(key, namespace, after)` would yield (by bisection)."""
        ordered = self._ordered.get(key)
        if not ordered:
            return 0
        end = ordered.bisect_left(f"{namespace}0") if namespace else len(ordered)  # "/" + 1
        start: int = ordered.bisect_right(after)
        return max(0, int(end) - start)

    def keys(self) -> KeyList:
        return list(self._objects)

    @property
    def compacted_resource_version(self) -> int:
        """etcd's: list snapshots (continue tokens) older than this are gone."""
        if time.monotonic() >= self._compaction[0]:
            self._etcd_compacted = max(self._etcd_compacted, self._compaction[1])
            self._compaction = (time.monotonic() + COMPACTION_INTERVAL, self._rv)
        return self._etcd_compacted

    def locate_uid(self, uid: str) -> tuple[StorageKey, str, str] | None:
        return self._by_uid.get(uid)

    def dependents(self, owner_uid: str) -> Idents:
        """Objects whose ownerReferences name this uid."""
        return sorted(self._by_owner.get(owner_uid, ()))

    # writes -----------------------------------------------------------------------------
    def put(self, key: StorageKey, obj: dict[str, Any], *, etcd_limit: bool = False) -> Stored:
        """Store a new version (create or update); stamps the next resourceVersion into obj.
        `etcd_limit`: refuse what etcd would (for kinds etcd holds as JSON, as kubesim does)."""
        meta = obj["metadata"]
        bucket = self._objects.setdefault(key, {})
        ident = (meta.get("namespace", ""), meta["name"])
        old = bucket.get(ident)
        stored = self._stamp(obj)
        if etcd_limit and len(stored.full) > ETCD_MAX_REQUEST_BYTES:
            # etcd refuses the write (or the client to send it) and its revision stays
            self._rv -= 1
            # the transaction carries the object and its key (put, and the compare before it)
            message = len(stored.full) + 2 * len(f"/registry/{key[0]}/{key[1]}/{ident[0]}/"
                                                 f"{ident[1]}")
            if message > ETCD_CLIENT_MAX_MESSAGE_BYTES:
                raise etcd_message_too_large(message)
            raise etcd_request_too_large()
        bucket[ident] = stored
        if old is None:
            self._ordered.setdefault(key, SortedDict())[storage_order(*ident)] = ident
        if old is not None:
            self._unindex(key, old)
        self._index(key, stored)
        self._emit(Event(MODIFIED if old else ADDED, key, stored.rv, stored, old))
        return stored

    def _index(self, key: StorageKey, stored: Stored) -> None:
        meta = stored.obj["metadata"]
        ident = (key, meta.get("namespace", ""), meta["name"])
        if meta.get("uid"):
            self._by_uid[meta["uid"]] = ident
        for owner in meta.get("ownerReferences") or ():
            self._by_owner.setdefault(owner.get("uid", ""), set()).add(ident)

    def _unindex(self, key: StorageKey, stored: Stored) -> None:
        meta = stored.obj["metadata"]
        ident = (key, meta.get("namespace", ""), meta["name"])
        self._by_uid.pop(meta.get("uid", ""), None)
        for owner in meta.get("ownerReferences") or ():
            dependents = self._by_owner.get(owner.get("uid", ""))
            if dependents is not None:
                dependents.discard(ident)
                if not dependents:
                    del self._by_owner[owner.get("uid", "")]

    def remove(self, key: StorageKey, namespace: str, name: str) -> Stored | None:
        """Delete an object; its DELETED event carries its last content at a new version."""
        bucket = self._objects.get(key, {})
        old = bucket.pop((namespace, name), None)
        if old is None:
            return None
        self._ordered[key].pop(storage_order(namespace, name), None)
        self._unindex(key, old)
        obj = dict(old.obj)
        obj["metadata"] = dict(obj["metadata"])
        stored = self._stamp(obj)
        self._emit(Event(DELETED, key, stored.rv, stored, old))
        return stored

    def drop_kind(self, key: StorageKey) -> None:
        self._objects.pop(key, None)
        self._ordered.pop(key, None)
        for watcher in self._watchers.pop(key, []):
            watcher.close()

    def _stamp(self, obj: dict[str, Any]) -> Stored:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        return Stored.of(obj, self._rv)

    def _emit(self, event: Event) -> None:
        history = self._histories.get(event.key)
        if history is None:
            history = self._histories[event.key] = History(*self._history_bounds)
        history.add(event, time.monotonic())
        for watcher in self._watchers.get(event.key, ()):
            watcher.offer(event)
        for listener in self._listeners:
            listener(event)

    # history and watches ------------------------------------------------------------------
    def compact(self) -> None:
        """Forget all history up to now, like etcd compaction (watches from older RVs get 410)."""
        self._histories.clear()
        self._compacted = self._etcd_compacted = self._rv

    def events_since(self, key: StorageKey, rv: int) -> Iterator[Event]:
        """The resource's events after `rv` (a watch's backlog); 410 once its history lost any."""
        if rv < self._compacted:
            raise expired(f"too old resource version: {rv} ({self._compacted})")
        history = self._histories.get(key)
        return iter(history.since(rv) if history is not None else ())

    def watch(self, key: StorageKey, namespace: str, matches: Filter | None) -> Watcher:
        watcher = Watcher(key, namespace, matches)
        self._watchers.setdefault(key, []).append(watcher)
        return watcher

    def listen(self, listener: Listener) -> None:
        """Call `listener(event)` for every later event of every kind, synchronously inside the
        write (a listener only takes note: it must not write)."""
        self._listeners.append(listener)

    def unlisten(self, listener: Listener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def unwatch(self, watcher: Watcher) -> None:
        watchers = self._watchers.get(watcher.key, [])
        if watcher in watchers:
            watchers.remove(watcher)

    def close_watchers(self) -> None:
        for watchers in self._watchers.values():
            for watcher in watchers:
                watcher.close()

    def watcher_count(self) -> int:
        return sum(len(w) for w in self._watchers.values())
