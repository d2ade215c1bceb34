"""`WatchStream`: one open watch as the watch cache serves it: the backlog (initial state or
history since a resourceVersion), then live events, BOOKMARKs, until the timeout or close."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from kubesim.kinds import ResourceKind
from kubesim.store import Store, Stored, Watcher

BOOKMARK, ERROR = "BOOKMARK", "ERROR"


INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def bookmark(kind: ResourceKind, rv: int, initial_events_end: bool = False) -> Stored:
    """A BOOKMARK's object: only the type and the resourceVersion all events up to are sent;
    the one closing a sendInitialEvents backlog is annotated so."""
    metadata: dict[str, object] = {"resourceVersion": str(rv)}
    if initial_events_end:
        metadata["annotations"] = {INITIAL_EVENTS_END: "true"}
    return Stored.of({"apiVersion": kind.api_version, "kind": kind.kind,
                      "metadata": metadata}, rv)


class WatchStream:
    """One open watch: the backlog (initial state or history), then live events, bookmarks
    (every `bookmark_interval` and 2 s before the timeout, as the watch cache does), until the
    timeout or `close()`. As a cacheWatcher, it sends no bookmark at or below the version the
    watch started from (`start_rv`): a watch of a resource nothing changed since gets none."""

    def __init__(self, store: Store, kind: ResourceKind, deadline: float | None,
                 allow_bookmarks: bool, bookmark_interval: Callable[[], float]) -> None:
        self.store = store
        self.kind = kind
        self.bookmark_interval = bookmark_interval
        self.deadline = deadline
        self.allow_bookmarks = allow_bookmarks
        self.backlog: list[tuple[str, Stored]] = []
        self.start_rv = store.resource_version
        self.watcher: Watcher | None = None
        # kinds served as a view of another kind's storage convert what they yield
        self.present: Callable[[Stored], Stored] | None = None
        self._backlog_left = 0

    def close(self) -> None:
        if self.watcher is not None:
            self.store.unwatch(self.watcher)

    def has_pending(self) -> bool:
        """More events are ready right now (writers batch them into one write)."""
        return self._backlog_left > 0 or (
            self.watcher is not None and not self.watcher.queue.empty())

    async def __aiter__(self) -> AsyncIterator[tuple[str, Stored]]:
        if self.present is None:
            async for item in self._events():
                yield item
            return
        async for event_type, stored in self._events():
            yield event_type, (stored if event_type in (ERROR, BOOKMARK) else
                               self.present(stored))

    async def _events(self) -> AsyncIterator[tuple[str, Stored]]:
        try:
            self._backlog_left = len(self.backlog)
            for item in self.backlog:
                self._backlog_left -= 1
                yield item
            if self.watcher is None:
                return
            async for item in self._live(self.watcher):
                yield item
        finally:
            self.close()

    def _next_bookmark(self, now: float, periodic: float, sent_final: bool) -> float | None:
        if not self.allow_bookmarks:
            return None
        wake = periodic
        if self.deadline is not None and not sent_final:
            wake = min(wake, self.deadline - 2)
        return wake

    async def _live(self, watcher: Watcher) -> AsyncIterator[tuple[str, Stored]]:
        loop = asyncio.get_running_loop()
        periodic = loop.time() + self.bookmark_interval()
        sent_final = False
        if self.deadline is not None and self.deadline - 2 < loop.time():
            # cacheWatcher.nextBookmarkTime: the pre-timeout bookmark time is already past,
            # so this watcher gets no bookmarks at all (timeouts under 2 s)
            self.allow_bookmarks = False
        while True:
            now = loop.time()
            if self.deadline is not None and now >= self.deadline:
                return
            bookmark_at = self._next_bookmark(now, periodic, sent_final)
            wake = min(t for t in (bookmark_at, self.deadline) if t is not None) if (
                bookmark_at is not None or self.deadline is not None) else None
            try:
                if wake is None or not watcher.queue.empty():
                    # What is queued goes out at once (a get from a queue holding something
                    # does not wait). Waiting for it through wait_for (a task and its turns
                    # through a busy loop) put the watchers of a loaded server tens of
                    # thousands of events behind, where kube-apiserver's are a buffer behind.
                    item = await watcher.queue.get()
                else:
                    item = await asyncio.wait_for(watcher.queue.get(), max(wake - now, 0))
            except TimeoutError:
                if bookmark_at is not None and loop.time() >= bookmark_at:
                    if self.store.resource_version > self.start_rv:
                        yield BOOKMARK, bookmark(self.kind, self.store.resource_version)
                    periodic = loop.time() + self.bookmark_interval()
                    if self.deadline is not None and self.deadline - 2 <= loop.time():
                        sent_final = True
                continue
            if item is None:
                return
            yield item
