"""A thread-safe work queue of keys, like client-go's workqueue: a key waiting is queued once,
a key being processed is never processed twice at once (re-added, it runs again afterwards),
and a failed key comes back after an exponential backoff.

Watch handlers on both operator threads add keys; reconcile workers take them, on the
controller's event loop (`get_async`: no thread parked per worker, no thread hop per key).
"""

from __future__ import annotations

import asyncio
import heapq
import threading
import time
from collections import deque
from collections.abc import Hashable

SYNC_WAIT = 0.2
"""Seconds between looks at whether a key's mirrors are listed, for workers that hold keys until
then (nothing is decided on a half-filled mirror)."""


class KeyQueue:
    def __init__(self, base_delay: float = 0.5, max_delay: float = 30.0) -> None:
        self._cond = threading.Condition()
        self._queue: deque[Hashable] = deque()
        self._dirty: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._delayed: list[tuple[float, int, Hashable, bool]] = []
        """(due, order, key, planned): planned wake-ups (a token's refresh time) are not
        pending work, so that `len` reads 0 once everything is converged."""
        self._counter = 0
        self._failures: dict[Hashable, int] = {}
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._shut = False
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()
        """`get_async` callers with nothing to take: one is woken per key that comes."""

    def add(self, key: Hashable) -> None:
        with self._cond:
            self._add_locked(key)

    def _add_locked(self, key: Hashable) -> None:
        if key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.append(key)
            self._notify_locked()

    def _notify_locked(self) -> None:
        self._cond.notify()
        while self._waiters:
            loop, waiter = self._waiters.popleft()
            try:
                loop.call_soon_threadsafe(_wake, waiter)
                return
            except RuntimeError:  # its loop has closed
                continue

    def add_after(self, key: Hashable, delay: float, *, planned: bool = False) -> None:
        """Add `key` in `delay` seconds; `planned` for a scheduled look (not a backoff or a
        wait), which does not count as pending work."""
        with self._cond:
            self._counter += 1
            item = (time.monotonic() + delay, self._counter, key, planned)
            heapq.heappush(self._delayed, item)
            if self._delayed[0] is item:  # due first: a waiter must wait less
                self._notify_locked()

    def retry(self, key: Hashable) -> float:
        """Re-add `key` after its next backoff delay; returns the delay."""
        with self._cond:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
        delay = float(min(self._max_delay, self._base_delay * (2.0**failures)))
        self.add_after(key, delay)
        return delay

    def forget(self, key: Hashable) -> None:
        """`key` succeeded: its next failure starts the backoff afresh."""
        with self._cond:
            self._failures.pop(key, None)

    def pending(self) -> bool:
        """True while a key is ready to be taken (delayed keys not counted)."""
        with self._cond:
            return bool(self._queue)

    def timers(self) -> int:
        """Delayed adds not yet due (backoffs and planned looks), each counted: what the queue
        holds in memory for later."""
        with self._cond:
            return len(self._delayed)

    def __len__(self) -> int:
        """Keys waiting, backing off or being processed: 0 once everything is converged."""
        with self._cond:
            return len(self._dirty | self._processing) + sum(
                1 for *_, planned in self._delayed if not planned)

    def _take_locked(self) -> tuple[Hashable | None, float | None]:
        """(the next key, None), or (None, seconds until a delayed key is due, None for
        none): nothing to take yet."""
        now = time.monotonic()
        while self._delayed and self._delayed[0][0] <= now:
            self._add_locked(heapq.heappop(self._delayed)[2])
        if self._queue:
            key = self._queue.popleft()
            self._dirty.discard(key)
            self._processing.add(key)
            return key, None
        return None, (self._delayed[0][0] - now if self._delayed else None)

    def get(self) -> Hashable | None:
        """The next key to process, waiting for one (None once shut down). Call `done(key)`
        afterwards."""
        with self._cond:
            while not self._shut:
                key, timeout = self._take_locked()
                if key is not None:
                    return key
                self._cond.wait(timeout)
            return None

    async def get_async(self) -> Hashable | None:
        """`get` for a coroutine: waits on its event loop."""
        loop = asyncio.get_running_loop()
        while True:
            with self._cond:
                if self._shut:
                    return None
                key, timeout = self._take_locked()
                if key is not None:
                    return key
                waiter: asyncio.Future[None] = loop.create_future()
                self._waiters.append((loop, waiter))
            try:
                await asyncio.wait((waiter,), timeout=timeout)
            except BaseException:
                with self._cond:
                    if not self._forget_waiter(loop, waiter):
                        self._notify_locked()  # woken, but leaving: the key is another's
                raise
            with self._cond:
                self._forget_waiter(loop, waiter)

    def _forget_waiter(self, loop: asyncio.AbstractEventLoop,
                       waiter: asyncio.Future[None]) -> bool:
        """False when a notifier took it already (its wake-up was meant for this caller)."""
        try:
            self._waiters.remove((loop, waiter))
            return True
        except ValueError:
            return False

    def done(self, key: Hashable) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._notify_locked()

    def is_shut_down(self) -> bool:
        with self._cond:
            return self._shut

    def shutdown(self) -> None:
        with self._cond:
            self._shut = True
            self._cond.notify_all()
            while self._waiters:
                loop, waiter = self._waiters.popleft()
                try:
                    loop.call_soon_threadsafe(_wake, waiter)
                except RuntimeError:
                    pass


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
