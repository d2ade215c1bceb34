"""What the run sees happen, from its own watches: when each object was first seen and first
seen Running; and waiting, always with a deadline, for what it waits for."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from annex.api_errors import ApiError, WatchExpired
from annex.kubeapi import ClusterApi
from annex.transport_errors import TransportError

Key = tuple[str, str, str]
"""(kind as the run names it, e.g. remote-shadowpods; namespace; name)"""


class Timeline:
    """When each object was first seen (and first seen Running), the uids each name had, and
    when objects were deleted, from watches."""

    def __init__(self) -> None:
        self.seen: dict[Key, float] = {}
        self.running: dict[Key, float] = {}
        self.uids: dict[Key, set[str]] = {}
        """Every object a name was: two for one name, it was made again."""
        self.deletions: list[tuple[Key, float]] = []
        self.changes: Counter[tuple[str, str, str]] = Counter()
        """Events so far by (kind, namespace, ADDED, MODIFIED or DELETED): each a change some
        write made (a write that changes nothing makes none)."""
        self.waiters: dict[tuple[str, str, str, str], asyncio.Future[dict[str, Any]]] = {}

    def record(self, kind: str, event: dict[str, Any]) -> None:
        if event.get("type") not in ("ADDED", "MODIFIED", "DELETED"):
            return
        now = time.monotonic()
        obj = event["object"]
        key = (kind, obj["metadata"]["namespace"], obj["metadata"]["name"])
        self.uids.setdefault(key, set()).add(str(obj["metadata"].get("uid")))
        self.changes[(kind, key[1], event["type"])] += 1
        if event["type"] == "DELETED":
            self.deletions.append((key, now))
            return
        self.seen.setdefault(key, now)
        self._wake((*key, "seen"), obj)
        status = obj.get("status") or {}
        phase = (status.get("podStatus") or {}) if kind.endswith("shadowpods") else status
        if phase.get("phase") == "Running" and key not in self.running:
            self.running[key] = now
            self._wake((*key, "running"), obj)

    def _wake(self, key: tuple[str, str, str, str], obj: dict[str, Any]) -> None:
        waiter = self.waiters.pop(key, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(obj)

    def wait_running(self, kind: str, namespace: str, name: str) -> Awaitable[dict[str, Any]]:
        future = asyncio.get_running_loop().create_future()
        if (kind, namespace, name) in self.running:
            future.set_result({"status": {"phase": "Running"}})
        else:
            self.waiters[(kind, namespace, name, "running")] = future
        return future

    def all_of(self, table: dict[Key, float], kind: str, namespace: str,
               names: list[str]) -> Callable[[], bool]:
        """A condition: every named object is in `table` (seen or running)."""
        return lambda: all((kind, namespace, name) in table for name in names)


async def follow(api: ClusterApi, path: str, kind: str, timeline: Timeline) -> None:
    """Record every event of a collection from now on: a watch continued from its last version
    when it ends or breaks, a new list (recorded too) when that version expired."""
    version = str((await api.get(path))["metadata"]["resourceVersion"])
    while True:
        try:
            async for event in api.watch(path, version):
                version = str(event["object"]["metadata"].get("resourceVersion") or version)
                timeline.record(kind, event)
        except WatchExpired:
            listed = await api.get(path)
            for obj in listed.get("items") or []:
                timeline.record(kind, {"type": "MODIFIED", "object": obj})
            version = str(listed["metadata"]["resourceVersion"])
        except (TimeoutError, ApiError, TransportError, RuntimeError):
            await asyncio.sleep(0.2)  # the same version again


async def until(condition: Callable[[], bool], timeout: float, what: str,
                interval: float = 0.05) -> float:
    """Wait for `condition`; returns when it held (time.monotonic())."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(interval)
    return time.monotonic()


async def until_async(condition: Callable[[], Awaitable[bool]], timeout: float,
                      what: str) -> None:
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(0.2)


async def gather_limited(calls: Iterable[Callable[[], Awaitable[Any]]], limit: int) -> None:
    """Run the calls, at most `limit` at once."""
    pending = iter(calls)

    async def lane() -> None:
        for call in pending:
            await call()
    await asyncio.gather(*(lane() for _ in range(limit)))
