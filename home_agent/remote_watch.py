"""The remote watches' lifecycle: the tenant watch once this consumer's NamespaceMap exists
(the agent creates it first; a standby replica, which writes nothing, watches at once), and a
twins watch kept on the accepted twin namespaces."""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from annex.api_errors import error_message
from annex.informers import Informers
from annex.kube import LiveConnection
from home_agent.namespace_map import ConsumerNamespaceMap, ensure_namespace_map
from home_agent.twins import TwinNamespaces
from home_agent.watches import (
    TENANT_WATCH,
    TWINS_WATCH,
    EventSink,
    Watch,
    declared_watch,
)

log = logging.getLogger(__name__)

TWINS_SYNC_GRACE = 10.0
"""Seconds without a new object after which a twins watch not yet listed counts as listed."""
TWINS_SYNC_LIMIT = 120.0
"""Seconds after which it counts as listed even while new objects keep coming."""


@dataclass(frozen=True)
class RemoteWatchSources:
    """What the remote watches are started with and report to: the informer registry and its
    remote side's name, the remote's live credentials, the tenant namespace, the twin
    namespaces, this consumer's NamespaceMap, and the events set once each side is listed
    (`tenant_listed` is called then too)."""

    informers: Informers
    side: str
    remote: LiveConnection
    tenant_namespace: str
    twins: TwinNamespaces
    namespace_map: ConsumerNamespaceMap
    tenant_synced: threading.Event
    twins_synced: threading.Event
    tenant_listed: Callable[[], None]


class RemoteWatches:
    def __init__(self, sources: RemoteWatchSources, sink: EventSink | None = None) -> None:
        """The two watches list what the registry declares for them (`home_agent.routes`)."""
        self.sources = sources
        self._sink = sink or functools.partial(sources.informers.dispatch, sources.side)
        self.tenant: Watch | None = None
        self.twins: Watch | None = None
        self.twin_namespaces: frozenset[str] = frozenset()

    async def start(self, create_namespace_map: bool = True) -> None:
        """Create the NamespaceMap, then watch. A standby (`create_namespace_map` false) writes
        nothing: it watches at once, and the leader creates the map once elected."""
        if create_namespace_map:
            await self.create_namespace_map()
        sources = self.sources

        def tenant_synced() -> None:
            log.info("remote tenant namespace listed")
            sources.tenant_synced.set()
            sources.tenant_listed()

        self.tenant = Watch(
            sources.remote,
            declared_watch(sources.informers, sources.side, TENANT_WATCH,
                           (sources.tenant_namespace,)),
            self._sink, tenant_synced)
        self.tenant.start()

    async def create_namespace_map(self) -> None:
        """Create this consumer's NamespaceMap unless it exists, retrying while the remote is
        unreachable."""
        delay = 0.5
        while True:
            try:
                await ensure_namespace_map(self.sources.namespace_map)
                return
            except Exception as error:  # noqa: BLE001 - retried until the remote answers
                log.warning("cannot reach the remote tenant namespace (retry in %.1fs): %s",
                            delay, error_message(error))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)

    def follow_twins(self) -> None:
        """Watch ShadowPods in exactly the accepted twin namespaces (on the agent's loop). A
        changed set replaces the twins watch; the new one relists."""
        sources = self.sources
        namespaces = sources.twins.accepted_twins()
        if namespaces == self.twin_namespaces and (
                sources.twins_synced.is_set() or self.twins is not None):
            return  # listed, or still listing exactly these: never restart a listing
        sources.twins_synced.clear()
        if self.twins is not None:
            self.twins.stop()
        self.twins, self.twin_namespaces = None, namespaces
        sources.informers.start_relist(sources.side, self._relisted())
        if not namespaces:
            self._finish_relist()
            sources.twins_synced.set()
            return
        watch: Watch | None = None

        def synced() -> None:
            if self.twins is not watch or sources.twins_synced.is_set():
                return
            self._finish_relist()
            sources.twins_synced.set()
            log.info("ShadowPods listed")

        # A listing that never completes (e.g. in a twin namespace being deleted) is taken as
        # complete once a grace period brings no new object. One still bringing objects is not
        # cut short: thousands of ShadowPods and reflected copies take longer than the grace
        # period, and deciding then made the agent act on half-filled mirrors (a create
        # answered 409 per ShadowPod not yet listed, token Secrets written again). Deciding
        # early stays safe for ShadowPods: one is only ever deleted after a live read, and a
        # create that finds one answers 409.
        # Progress is counted, not remembered: a set of the keys listed stayed for good.
        progress = [0]

        def sink(plural: str, event_type: str | None, obj: dict[str, Any]) -> None:
            progress[0] += 1
            self._sink(plural, event_type, obj)

        started = time.monotonic()
        loop = asyncio.get_running_loop()

        def grace(seen: int) -> None:
            if self.twins is not watch:
                return  # replaced
            if progress[0] == seen or time.monotonic() - started >= TWINS_SYNC_LIMIT:
                synced()
            elif not sources.twins_synced.is_set():
                loop.call_later(TWINS_SYNC_GRACE, grace, progress[0])

        log.info("watching ShadowPods in %s", ", ".join(sorted(namespaces)))
        watch = self.twins = Watch(
            sources.remote,
            declared_watch(sources.informers, sources.side, TWINS_WATCH,
                           tuple(sorted(namespaces))),
            sink, synced)
        grace(-1)
        watch.start()

    def _relisted(self) -> list[str]:
        """The twins watch's resources: their mirrors are relisted with it."""
        sources = self.sources
        return [plural for _, _, plural in sources.informers.watched(sources.side, TWINS_WATCH)]

    def _finish_relist(self) -> None:
        self.sources.informers.finish_relist(self.sources.side, self._relisted())

    def alive(self) -> bool:
        return all(watch is None or watch.is_alive() for watch in (self.tenant, self.twins))

    def stop(self) -> None:
        for watch in (self.tenant, self.twins):
            if watch is not None:
                watch.stop()
