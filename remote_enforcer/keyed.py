"""Runs an async reconcile per key: never twice at once for one key, a key triggered while it
runs runs once more afterwards (events coalesce), at most `workers` keys at once (0: no limit),
and a key that failed comes back after an exponential backoff."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from annex.kubeapi import error_message

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


class KeyedRunner(Generic[K]):
    def __init__(self, reconcile: Callable[[K], Awaitable[None]], workers: int = 0,
                 base_delay: float = 0.5, max_delay: float = 30.0) -> None:
        self._reconcile = reconcile
        self._slots = asyncio.Semaphore(workers) if workers > 0 else None
        self._running: set[K] = set()
        self._again: set[K] = set()
        self._failures: dict[K, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._base_delay, self._max_delay = base_delay, max_delay

    def __len__(self) -> int:
        """Keys running or waiting to run."""
        return len(self._running)

    def trigger(self, key: K) -> None:
        if key in self._running:
            self._again.add(key)
            return
        self._running.add(key)
        task = asyncio.get_running_loop().create_task(self._run(key))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, key: K) -> None:
        try:
            while True:
                self._again.discard(key)
                if self._slots is None:
                    failed = await self._attempt(key)
                else:
                    async with self._slots:
                        failed = await self._attempt(key)
                if failed or key not in self._again:
                    break
        finally:
            self._running.discard(key)
            self._again.discard(key)
        if failed:
            failures = self._failures[key] = self._failures.get(key, 0) + 1
            delay = min(self._base_delay * 2 ** (failures - 1), self._max_delay)
            asyncio.get_running_loop().call_later(delay, self.trigger, key)

    async def _attempt(self, key: K) -> bool:
        """Reconcile once; True when it failed."""
        try:
            await self._reconcile(key)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - retried after a backoff, not fatal
            log.warning("reconcile %s failed (retried): %s", key, error_message(error))
            return True
        self._failures.pop(key, None)
        return False

    def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()
