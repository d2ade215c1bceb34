"""What every controller shares: watching kinds forever, a de-duplicating work queue, retries.

Controllers are in-process clients of the `ApiServer` (as the system user). They are
level-triggered: an event only says which key to look at; the reconcile function reads the
current state and makes it right, so a missed or repeated event does no harm and a 409 Conflict
is simply retried.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from kubesim.apiserver import ApiServer, copy_json, now_timestamp
from kubesim.errors import StatusError
from kubesim.kinds import ResourceKind
from kubesim.store import Stored

log = logging.getLogger("kubesim.controllers")
EventHandler = Callable[[str, Stored], None]


def kind_of(api: ApiServer, group: str, version: str, plural: str) -> ResourceKind:
    kind = api.kinds.get(group, version, plural)
    if kind is None:
        raise LookupError(f"kubesim serves no {plural}.{group}/{version}")
    return kind


async def watch_forever(
    api: ApiServer, kind: ResourceKind, on_event: EventHandler, namespace: str = "",
    field_selector: str = "", synced: asyncio.Event | None = None,
) -> None:
    """Call `on_event(type, stored)` for the current state, then for every change, forever.

    A broken or expired watch is reopened from the last seen resourceVersion (from scratch
    after a 410 or a failure). A listing from scratch reports what it no longer shows as DELETED
    with its last seen state, once the listing is delivered, as client-go's informers do
    (`Replace`): a controller's caches never keep an object deleted while it was not watching.
    `synced` is set once the initial state has been delivered.
    """
    resource_version = ""
    known: dict[str, dict[str, Stored]] = {}
    """Namespace → name → the last state delivered (references to the store's objects)."""
    while True:
        try:
            stream = api.open_watch(kind, namespace, resource_version=resource_version,
                                    field_selector=field_selector)
            listed: dict[str, set[str]] | None = None if resource_version else {}
            initial = len(stream.backlog) if listed is not None else 0
            seen = 0
            if listed is not None and initial == 0:
                _deliver_unlisted(known, listed, on_event)
                if synced is not None:
                    synced.set()
            async for event_type, stored in stream:
                if event_type == "ERROR":
                    resource_version = ""
                    break
                if event_type != "BOOKMARK":
                    metadata = stored.obj.get("metadata") or {}
                    object_namespace, name = metadata.get("namespace") or "", metadata["name"]
                    if event_type == "DELETED":
                        names = known.get(object_namespace, {})
                        names.pop(name, None)
                        if not names:
                            known.pop(object_namespace, None)
                    else:
                        known.setdefault(object_namespace, {})[name] = stored
                    if listed is not None:
                        listed.setdefault(object_namespace, set()).add(name)
                    on_event(event_type, stored)
                resource_version = str(stored.rv) if stored.rv else resource_version
                seen += 1
                if seen == initial and listed is not None:
                    _deliver_unlisted(known, listed, on_event)
                    listed = None
                    if synced is not None:
                        synced.set()
        except asyncio.CancelledError:
            raise
        except Exception:  # a watch must never die for good: log and reopen
            log.exception("watch on %s failed; reopening", kind.plural)
            await asyncio.sleep(0.5)
            resource_version = ""


def _deliver_unlisted(known: dict[str, dict[str, Stored]], listed: dict[str, set[str]],
                      on_event: EventHandler) -> None:
    """DELETED for what `known` holds and a complete listing did not show (forgotten then)."""
    for object_namespace in list(known):
        names, shown = known[object_namespace], listed.get(object_namespace, set())
        for name in [name for name in names if name not in shown]:
            on_event("DELETED", names[name])
            del names[name]  # after: a handler that fails sees it at the next listing again
        if not names:
            del known[object_namespace]


class WorkQueue:
    """Keys to reconcile: each key queued at most once; failures retried with back-off."""

    def __init__(self, reconcile: Callable[[Any], Awaitable[None]], name: str,
                 workers: int = 1) -> None:
        self._reconcile = reconcile
        self._name = name
        self._workers = workers
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._pending: set[Any] = set()
        self._active: set[Any] = set()
        self._dirty: set[Any] = set()
        self._failures: dict[Any, int] = {}

    def add(self, key: Any) -> None:
        if key in self._active:
            self._dirty.add(key)  # reconcile again once the running pass is done
            return
        if key not in self._pending:
            self._pending.add(key)
            self._queue.put_nowait(key)

    def add_later(self, key: Any, delay: float) -> None:
        asyncio.get_running_loop().call_later(delay, self.add, key)

    async def run(self) -> None:
        await asyncio.gather(*(self._worker() for _ in range(self._workers)))

    async def _worker(self) -> None:
        while True:
            key = await self._queue.get()
            self._pending.discard(key)
            self._active.add(key)
            try:
                await self._reconcile(key)
                self._failures.pop(key, None)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                failures = self._failures[key] = self._failures.get(key, 0) + 1
                if not (isinstance(error, StatusError) and error.code in (404, 409)):
                    log.warning("%s: reconciling %s failed (%s); retrying", self._name, key,
                                error)
                self.add_later(key, min(0.05 * 2 ** min(failures, 6), 2.0))
            finally:
                self._active.discard(key)
                if key in self._dirty:
                    self._dirty.discard(key)
                    self.add(key)


async def run_together(*coroutines: Coroutine[Any, Any, Any]) -> None:
    """Run a controller's watches and workers as tasks; when one ends or this is cancelled,
    the others are cancelled too."""
    tasks = [asyncio.create_task(coroutine) for coroutine in coroutines]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()


def apply_on_loop(loop: asyncio.AbstractEventLoop | None, action: Callable[[], None]) -> None:
    """Apply `action` on the cluster's loop: directly when called on it, else from another
    thread (tests run clusters on a background loop), waiting until it is done."""
    if loop is None:
        raise RuntimeError("the controller is not running")
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        action()
        return

    async def apply() -> None:
        action()

    asyncio.run_coroutine_threadsafe(apply(), loop).result(30)


async def replace_status(api: ApiServer, kind: ResourceKind, obj: dict[str, Any],
                         status: dict[str, Any]) -> None:
    """Write `status` as the object's status (its status subresource), unless it says that
    already: a controller's status writes happen only on a change."""
    if (obj.get("status") or {}) == status:
        return
    new = copy_json(obj)
    new["status"] = status
    metadata = obj["metadata"]
    await api.update(kind, metadata.get("namespace") or "", metadata["name"], new,
                     subresource="status")


def set_pod_condition(status: dict[str, Any], condition: dict[str, str]) -> bool:
    """apipod.UpdatePodCondition: `condition` set in a pod's `status`, replacing the one of its
    type; its lastTransitionTime moves only when its status does. Whether anything changed."""
    conditions = status.setdefault("conditions", [])
    existing = next((c for c in conditions if c.get("type") == condition["type"]), None)
    if existing is None:
        conditions.append({**condition, "lastTransitionTime": now_timestamp()})
        return True
    updated = {**existing, **condition}
    if existing.get("status") != condition.get("status"):
        updated["lastTransitionTime"] = now_timestamp()
    if updated == existing:
        return False
    conditions[conditions.index(existing)] = updated
    return True


class Controller:
    """A named background task of a cluster; subclasses implement `run`."""

    name = "controller"

    def __init__(self, api: ApiServer) -> None:
        self.api = api
        self.loop: asyncio.AbstractEventLoop | None = None

    async def run(self) -> None:
        raise NotImplementedError

    async def main(self) -> None:
        self.loop = asyncio.get_running_loop()
        await self.run()
