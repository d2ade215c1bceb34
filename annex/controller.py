"""One reconcile runtime for both components, after controller-runtime's Controller: a `KeyQueue`
of keys and `workers` coroutines that take them and call `reconcile(key) -> Result`.

What every controller gets from it, so that no reconcile spells it again:
- a key is never reconciled twice at once, and a key added while it runs runs once more
  afterwards (events coalesce) — the queue's rules;
- the sync gates: nothing is decided on a half-filled mirror. While `synced()` does not hold
  (the controller's mirrors are not listed) its workers take no key: keys wait in the queue
  untouched. A key taken before `ready(key)` holds (the mirrors that key's kind reads) is
  parked by `gate(key)`, still counted as in process, and goes back in line once its gate
  opens; parked keys do not cycle through the workers;
- one way to say what happened (`Result`): done, look again at a planned time, or retry after
  the key's exponential backoff; an exception is a retry too, logged with the key, and handed
  to `on_error` (which reports it on the object: an Event) before the backoff;
- per-controller counts of outcomes, results (controller-runtime's) and of keys in the queue,
  how long reconciles take (`reconcile_time`) and keys are processed (the queue's
  `work_duration`), for /metrics (`annex.metrics`);
- with tracing on (`annex.tracing`), a span per reconcile, continuing `traceparent(key)`;
- each reconcile's log lines tagged with the controller, the key's object and a reconcile id
  (`annex.logs.reconciling`), as controller-runtime's logger tags them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from annex import tracing
from annex.api_errors import error_message
from annex.logs import reconciling
from annex.metrics_histogram import RECONCILE_BUCKETS, Histogram
from annex.workqueue import SYNC_WAIT, KeyQueue

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Result:
    """What a reconcile asks of the runtime once it returns (controller-runtime's Result)."""

    requeue_after: float | None = None
    """Look at the key again in this many seconds: a planned look (a token's refresh time, a
    node waiting for its offer), not pending work: the queue reads empty meanwhile."""
    retry: bool = False
    """Not converged and nothing to do but wait (a dependency is missing, a refusal stands):
    back off like a failure, without logging one."""
    outcome: str = "success"
    """What the metrics count this reconcile as."""


DONE = Result()
RETRY = Result(retry=True, outcome="retry")


def _always(_: Hashable) -> bool:
    return True


def _one_gate(_: Hashable) -> None:
    return None


def object_of(key: Hashable) -> tuple[str | None, str | None]:
    """The (namespace, name) a key names, as the runtime's keys are spelled: a name, or a
    (namespace, name) pair."""
    if isinstance(key, str):
        return None, key
    if isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, str) for k in key):
        return key[0], key[1]
    return None, str(key)


def _no_cluster(_: Hashable) -> None:
    return None


class Controller(Generic[K]):
    def __init__(self, name: str, reconcile: Callable[[K], Awaitable[Result | None]], *,
                 workers: int, synced: Callable[[], bool] | None = None,
                 ready: Callable[[K], bool] = _always,
                 gate: Callable[[K], Hashable] = _one_gate,
                 on_error: Callable[[K, Exception], Awaitable[None]] | None = None,
                 observe: Callable[[K, str], None] | None = None,
                 queue: KeyQueue | None = None,
                 describe: Callable[[K], tuple[str | None, str | None]] = object_of,
                 cluster: Callable[[K], str | None] = _no_cluster,
                 traceparent: Callable[[K], object] | None = None) -> None:
        if workers < 1:
            raise ValueError(f"controller {name}: workers must be at least 1, not {workers}")
        self.name = name
        self.queue = queue if queue is not None else KeyQueue()
        self.workers = workers
        # Traced or not is decided here, once (`traceparent`: a key's untrusted W3C parent).
        self._reconcile = tracing.traced_reconcile(name, reconcile, describe, cluster,
                                                   traceparent)
        self._synced = synced
        """The controller's mirrors are listed: until then no key is taken (they wait in the
        queue untouched)."""
        self._ready = ready
        self._gate = gate
        """Keys of one gate are ready together: `ready` is asked once per gate and look, not
        once per parked key (tens of thousands wait during a restart's listings)."""
        self._on_error = on_error
        self._observe = observe
        self._describe = describe
        """A key's (namespace, name), and `cluster` the peer it concerns, for its log lines."""
        self._cluster = cluster
        self._outcomes: Counter[str] = Counter()
        self._results: Counter[str] = Counter()
        """controller-runtime's results: success, error, requeue (a retry), requeue_after."""
        self.reconcile_time = Histogram(RECONCILE_BUCKETS)
        self._parked: dict[Hashable, set[K]] = {}

    # --- what event handlers call (on the controller's loop) -------------------------------

    def add(self, key: K, priority: int = 0) -> None:
        self.queue.add(key, priority)

    def add_after(self, key: K, delay: float) -> None:
        """A planned look at `key` in `delay` seconds (not pending work)."""
        self.queue.add_after(key, delay, planned=True)

    def __len__(self) -> int:
        """Keys waiting, parked, backing off or being reconciled: 0 once converged."""
        return len(self.queue)

    def outcomes(self) -> dict[str, int]:
        return dict(self._outcomes)

    def results(self) -> dict[str, int]:
        """Reconciles by controller-runtime's result (success, error, requeue,
        requeue_after)."""
        return dict(self._results)

    # --- the workers -----------------------------------------------------------------------

    async def run(self) -> None:
        """The workers and, when keys can be parked (`ready` given), the parking lot, until
        `stop`."""
        parking = (asyncio.create_task(self._release_parked()) if self._ready is not _always
                   else None)
        try:
            await asyncio.gather(*(self._worker() for _ in range(self.workers)))
        finally:
            if parking is not None:
                parking.cancel()
                await asyncio.gather(parking, return_exceptions=True)

    def stop(self) -> None:
        self.queue.shutdown()

    async def _worker(self) -> None:
        while await self._until_synced():  # before taking: keys wait in the queue untouched
            key = await self.queue.get()
            if key is None:
                return
            if not await self._until_synced():  # a relist began while it waited for a key
                self.queue.done(key)
                return
            await self.process(key)  # type: ignore[arg-type]

    async def _until_synced(self) -> bool:
        """Wait for `synced()`; False once the controller stops."""
        while self._synced is not None and not self._synced():
            if self.queue.is_shut_down():
                return False
            await asyncio.sleep(SYNC_WAIT)
        return not self.queue.is_shut_down()

    async def process(self, key: K) -> None:
        """Reconcile one key taken from the queue, and tell the queue how it went."""
        if not self._ready(key):
            # It stays in process: `done` when released.
            self._parked.setdefault(self._gate(key), set()).add(key)
            return
        started = time.monotonic()
        with reconciling(self.name, *self._describe(key), cluster=self._cluster(key)):
            await self._process(key)
        self.queue.done(key)
        # One clock read for both: the reconcile is all the processing does (and, after a
        # failure, its report).
        elapsed = time.monotonic() - started
        self.reconcile_time.observe(elapsed)
        self.queue.work_duration.observe(elapsed)

    async def _process(self, key: K) -> None:
        try:
            result = await self._reconcile(key) or DONE
        except asyncio.CancelledError:
            self.queue.done(key)
            raise
        except Exception as error:  # noqa: BLE001 - one key's failure stops no other
            delay = self.queue.retry(key)
            self._count(key, "error", "error")
            log.warning("%s: reconcile %s failed (retry in %.1fs): %s", self.name, key, delay,
                        error_message(error))
            log.debug("%s: reconcile %s failed", self.name, key, exc_info=True)
            if self._on_error is not None:
                try:
                    await self._on_error(key, error)
                except Exception:  # noqa: BLE001 - reporting must not stop the worker
                    log.exception("%s: reporting the failure of %s failed", self.name, key)
        else:
            if result.retry:
                self.queue.retry(key)
                counted = "requeue"
            else:
                self.queue.forget(key)
                counted = "success"
                if result.requeue_after is not None:
                    self.queue.add_after(key, result.requeue_after, planned=True)
                    counted = "requeue_after"
            self._count(key, result.outcome, counted)

    def _count(self, key: K, outcome: str, result: str) -> None:
        self._outcomes[outcome] += 1
        self._results[result] += 1
        if self._observe is not None:
            self._observe(key, outcome)

    def release_parked(self) -> None:
        """Put the parked keys whose mirrors are listed now back in line."""
        gates = [gate for gate, keys in self._parked.items() if self._ready(next(iter(keys)))]
        ready = [key for gate in gates for key in self._parked.pop(gate)]
        for key in ready:
            self.queue.add(key)  # marked dirty while in process: `done` requeues it
            self.queue.done(key)

    async def _release_parked(self) -> None:
        while True:
            await asyncio.sleep(SYNC_WAIT)
            self.release_parked()

