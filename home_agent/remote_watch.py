"""The remote watches' lifecycle: the tenant watch once this consumer's NamespaceMap exists
(the agent creates it first), and a twins watch kept on the accepted twin namespaces."""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from typing import Any

from annex.kubeapi import error_message
from home_agent.agent import REMOTE, TWINS_KEY, Agent
from home_agent.namespace_map import ensure_namespace_map
from home_agent.operators import EventSink, OperatorThread, Watched, tenant_watch, twins_watch

log = logging.getLogger(__name__)

SHADOW_PODS = "shadowpods"

TWINS_SYNC_GRACE = 10.0
"""Seconds without a new object after which a twins watch not yet listed counts as listed."""
TWINS_SYNC_LIMIT = 120.0
"""Seconds after which it counts as listed even while new objects keep coming."""


class RemoteWatches:
    def __init__(self, agent: Agent, sink: EventSink | None = None,
                 reflected: tuple[Watched, ...] = ()) -> None:
        self.agent = agent
        self._sink = sink or functools.partial(agent.informers.dispatch, REMOTE)
        self._reflected = reflected
        """Kinds resource reflection adds to the twins watch."""
        self._relisted = [SHADOW_PODS, *(plural for _, _, plural in reflected)]
        """The twins watch's resources: their mirrors are relisted with it."""
        self._generation: object | None = None
        self.tenant: OperatorThread | None = None
        self.twins: OperatorThread | None = None
        self.twin_namespaces: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    async def start(self) -> None:
        """Create the NamespaceMap (retrying while the remote is unreachable), then watch."""
        delay = 0.5
        while True:
            try:
                await ensure_namespace_map(self.agent)
                break
            except Exception as error:  # noqa: BLE001 - retried until the remote answers
                log.warning("cannot reach the remote tenant namespace (retry in %.1fs): %s",
                            delay, error_message(error))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
        agent = self.agent

        def tenant_synced() -> None:
            log.info("remote tenant namespace listed")
            agent.tenant_synced.set()
            agent.enqueue(TWINS_KEY)

        self.tenant = OperatorThread(
            agent.remote.live,
            tenant_watch(agent.tenant_namespace),
            self._sink, tenant_synced)
        self.tenant.start()

    def follow_twins(self) -> None:
        """Watch ShadowPods in exactly the accepted twin namespaces (blocking: run it off the
        loop). A changed set replaces the twins operator; the new one relists."""
        agent = self.agent
        namespaces = agent.accepted_twin_namespaces()
        with self._lock:
            if namespaces == self.twin_namespaces and (
                    agent.twins_synced.is_set() or self.twins is not None):
                return  # listed, or still listing exactly these: never restart a listing
            agent.twins_synced.clear()
            previous, self.twins, self._generation = self.twins, None, None
        if previous is not None:
            previous.stop()  # outside the lock: its sync callback may be waiting for it
        with self._lock:
            self.twin_namespaces = namespaces
            agent.informers.start_relist(REMOTE, self._relisted)
            if not namespaces:
                self._finish_relist()
                agent.twins_synced.set()
                return

            generation = object()
            self._generation = generation

            def synced() -> None:
                with self._lock:
                    if self._generation is not generation or agent.twins_synced.is_set():
                        return
                    self._finish_relist()
                    agent.twins_synced.set()
                log.info("ShadowPods listed")

            # A listing that never completes (e.g. in a twin namespace being deleted) is taken
            # as complete once a grace period brings no new object. One still bringing objects
            # is not cut short: thousands of ShadowPods and reflected copies take longer than
            # the grace period, and deciding then made the agent act on half-filled mirrors (a
            # create answered 409 per ShadowPod not yet listed, token Secrets written again).
            # Deciding early stays safe for ShadowPods: one is only ever deleted after a live
            # read, and a create that finds one answers 409.
            # Progress is counted, not remembered: a set of the keys listed stayed for good.
            progress = [0]

            def sink(plural: str, event_type: str | None, obj: dict[str, Any]) -> None:
                progress[0] += 1
                self._sink(plural, event_type, obj)

            started = time.monotonic()

            def grace(seen: int) -> None:
                if (agent.twins_synced.is_set() or progress[0] == seen
                        or time.monotonic() - started >= TWINS_SYNC_LIMIT):
                    synced()
                    return
                timer = threading.Timer(TWINS_SYNC_GRACE, grace, (progress[0],))
                timer.daemon = True
                timer.start()

            grace(-1)
            log.info("watching ShadowPods in %s", ", ".join(sorted(namespaces)))
            self.twins = OperatorThread(
                agent.remote.live,
                twins_watch(namespaces, agent.config.home_cluster_id,
                            agent.config.remote_cluster_id, self._reflected),
                sink, synced)
            self.twins.start()

    def _finish_relist(self) -> None:
        self.agent.informers.finish_relist(REMOTE, self._relisted)

    def alive(self) -> bool:
        with self._lock:
            return all(o is None or o.is_alive() for o in (self.tenant, self.twins))

    def stop(self) -> None:
        with self._lock:
            for operator in (self.tenant, self.twins):
                if operator is not None:
                    operator.stop()
