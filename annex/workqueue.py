"""A work queue of keys, like client-go's workqueue: a key waiting is queued once, a key being
processed is never processed twice at once (re-added, it runs again afterwards), and a failed
key comes back after an exponential backoff.

Counted as client-go's workqueue metrics count (`annex.metrics` exports them): the adds, the
retries, how long each key waited in line (`queue_duration`, from the add that put it in line to
its take) and, observed by the controller, how long its processing took (`work_duration`).

Keys are taken by priority, then in the order they came (controller-runtime's priority queue):
a key added again with a higher priority moves up, never down. A controller gives work that
finishes something in flight a higher priority than work that starts something new, so that
a burst of new keys does not hold back every answer until the burst is through.

Used from one event loop's thread: the watches that add keys and the reconcile workers that
take them (`get`: no thread parked per worker, no thread hop per key) share a component's loop.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Hashable

from annex.metrics_histogram import WORKQUEUE_BUCKETS, Histogram

SYNC_WAIT = 0.2
"""Seconds between looks at whether a key's mirrors are listed, for workers that hold keys until
then (nothing is decided on a half-filled mirror)."""


class _Lane:
    """One priority's keys in the order added, and beside each the time it was added."""

    __slots__ = ("keys", "added")

    def __init__(self) -> None:
        self.keys: deque[Hashable] = deque()
        self.added: deque[float] = deque()
        """A deque beside the keys, not a tuple per key: 8 bytes a key, where a (key, time)
        pair cost 64 (a restart at N = 50,000 queues 400,000 keys)."""

    def append(self, key: Hashable) -> None:
        self.keys.append(key)
        added, now = self.added, time.monotonic()
        # Keys added within a millisecond share one time: a burst keeps one float, not one each.
        self.added.append(added[-1] if added and now - added[-1] < 0.001 else now)


class KeyQueue:
    def __init__(self, base_delay: float = 0.5, max_delay: float = 30.0) -> None:
        self._lanes: dict[int, _Lane] = {}
        """Priority -> keys in the order added. An entry is taken when its key waits at that
        priority and is not in process; any other (the key moved up a lane, or was taken from
        another entry) is skipped. Keys carry no ticket: a stale entry left in a lower lane
        can take a key added there again later a little ahead of its turn, which costs nothing,
        where a ticket cost about 200 bytes a key (a restart at N = 50,000 queues 400,000)."""
        self._dirty: dict[Hashable, int] = {}
        """Key waiting (queued, or in process and to run again) -> its priority."""
        self._queued = 0
        """Keys in the lanes that can be taken now (stale entries not counted)."""
        self._processing: set[Hashable] = set()
        self._rerun = 0
        """Keys both in process and waiting to run again (in `_dirty` and `_processing`):
        counted as they come and go, so that `len` iterates neither (a worker parks its keys
        in process until the mirrors are listed: at N = 50,000 a restart holds 400,000 there,
        and the benchmark's ten scrapes a second took 11 % of the restarted agent's CPU)."""
        self._delayed: list[tuple[float, int, Hashable, bool]] = []
        """(due, order, key, planned): planned wake-ups (a token's refresh time) are not
        pending work, so that `len` reads 0 once everything is converged."""
        self._unplanned = 0
        """Delayed adds that are pending work (backoffs, waits): counted as they come and go,
        so that `len` reads no heap (a metrics scrape asks it of every controller)."""
        self._counter = 0
        self._failures: dict[Hashable, int] = {}
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._shut = False
        self._waiters: deque[asyncio.Future[None]] = deque()
        """`get` callers with nothing to take: one is woken per key that comes."""
        self.adds = 0
        """Keys put in line (client-go's workqueue_adds_total: not a key already waiting)."""
        self.retries = 0
        """Backoffs started (client-go's workqueue_retries_total)."""
        self.queue_duration = Histogram(WORKQUEUE_BUCKETS)
        self.work_duration = Histogram(WORKQUEUE_BUCKETS)
        """Observed by whoever processes the keys (`annex.controller`)."""

    def add(self, key: Hashable, priority: int = 0) -> None:
        """Queue `key` once; added again with a higher `priority` it moves up to that lane."""
        waiting = self._dirty.get(key)
        if waiting is not None and waiting >= priority:
            return
        self._dirty[key] = priority
        if key not in self._processing:
            self._lane(priority).append(key)
            if waiting is None:
                self._queued += 1
                self.adds += 1
                self._wake_one()
        elif waiting is None:
            self._rerun += 1

    def _lane(self, priority: int) -> _Lane:
        lane = self._lanes.get(priority)
        if lane is None:
            lane = self._lanes[priority] = _Lane()
        return lane

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def add_after(self, key: Hashable, delay: float, *, planned: bool = False) -> None:
        """Add `key` in `delay` seconds; `planned` for a scheduled look (not a backoff or a
        wait), which does not count as pending work."""
        self._counter += 1
        item = (time.monotonic() + delay, self._counter, key, planned)
        heapq.heappush(self._delayed, item)
        self._unplanned += not planned
        if self._delayed[0] is item:  # due first: a waiter must wait less
            self._wake_one()

    def retry(self, key: Hashable) -> float:
        """Re-add `key` after its next backoff delay; returns the delay."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        self.retries += 1
        delay = float(min(self._max_delay, self._base_delay * (2.0**failures)))
        self.add_after(key, delay)
        return delay

    def forget(self, key: Hashable) -> None:
        """`key` succeeded: its next failure starts the backoff afresh."""
        self._failures.pop(key, None)

    def depth(self) -> int:
        """Keys in line, neither in process nor delayed (client-go's workqueue_depth)."""
        return self._queued

    def longest_wait(self, now: float) -> float:
        """Seconds the oldest key in line has waited (0 when none waits): how far behind the
        queue is. Read from the front of each lane, at scrape time."""
        oldest = min((lane.added[0] for lane in list(self._lanes.values()) if lane.added),
                     default=now)
        return max(0.0, now - oldest)

    def pending(self) -> bool:
        """True while a key is ready to be taken (delayed keys not counted)."""
        return self._queued > 0

    def timers(self) -> int:
        """Delayed adds not yet due (backoffs and planned looks), each counted: what the queue
        holds in memory for later."""
        return len(self._delayed)

    def __len__(self) -> int:
        """Keys waiting, backing off or being processed: 0 once everything is converged. Counted
        without reading the keys: a restart at N = 50,000 queues 400,000."""
        return len(self._dirty) + len(self._processing) - self._rerun + self._unplanned

    def take(self) -> Hashable | None:
        """The next key to process, if one is due now (call `done(key)` afterwards)."""
        now = time.monotonic()
        while self._delayed and self._delayed[0][0] <= now:
            _, _, key, planned = heapq.heappop(self._delayed)
            self._unplanned -= not planned
            self.add(key)
        if not self._queued or self._shut:
            return None
        for priority in sorted(self._lanes, reverse=True):
            lane = self._lanes[priority]
            keys, added = lane.keys, lane.added
            while keys:
                key = keys.popleft()
                since = added.popleft()
                if self._dirty.get(key) == priority and key not in self._processing:
                    del self._dirty[key]
                    self._queued -= 1
                    self._processing.add(key)
                    waited = self.queue_duration  # inlined `observe`: once per key
                    waited.counts[bisect_left(waited.bounds, now - since)] += 1
                    waited.total += now - since
                    return key
            del self._lanes[priority]
        raise AssertionError("keys counted queued but none found")  # pragma: no cover

    async def get(self) -> Hashable | None:
        """The next key to process, waiting for one (None once shut down)."""
        while not self._shut:
            key = self.take()
            if key is not None:
                return key
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            timeout = self._delayed[0][0] - time.monotonic() if self._delayed else None
            try:
                await asyncio.wait((waiter,), timeout=timeout)
            except BaseException:
                if waiter.done():
                    self._wake_one()  # woken, but leaving: the key is another's
                raise
            finally:
                waiter.cancel()  # a timed-out waiter is not woken for a later key
        return None

    def done(self, key: Hashable) -> None:
        self._processing.discard(key)
        waiting = self._dirty.get(key)
        if waiting is not None:
            self._rerun -= 1
            self._lane(waiting).append(key)
            self._queued += 1
            self.adds += 1
            self._wake_one()

    def is_shut_down(self) -> bool:
        return self._shut

    def shutdown(self) -> None:
        self._shut = True
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
