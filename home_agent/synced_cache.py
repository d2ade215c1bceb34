"""The optional Redis cache (`--redis-url`) of the pods last found converged, so that a restarted
agent skips the pods unchanged since (docs/benchmarks.md, "Redis").

Per pod key it keeps, msgpack-encoded in one Redis hash, the state a successful reconcile
started from: the fingerprint of its inputs (`shared.forge.pod_inputs.fingerprint`: the home
pod's and the ShadowPod's resourceVersions, the twin namespaces, the configs, everything the
decision reads but what the agent learnt since it started). It is read once, after both
clusters are listed, and only ever to skip a reconcile whose inputs are exactly those: nothing
is done from it (Liqo #2748). Lost, stale or unreachable, it costs only the reconciles it would
have saved: the agent runs without it.
"""

from __future__ import annotations

import asyncio
import logging

import msgpack
import redis.asyncio as aioredis

from annex.mirror import Key
from shared.forge.pod_inputs import PodInputs, fingerprint

log = logging.getLogger(__name__)

FLUSH_INTERVAL = 1.0
"""Seconds between batched writes to Redis (one pipeline each)."""

PodState = str
"""The fingerprint of a converged reconcile's inputs."""


def pod_state(inputs: PodInputs) -> PodState | None:
    """The state a converged pod reconcile starts from: pod and ShadowPod both there and
    neither being deleted (None otherwise: only such states are cached)."""
    if inputs.pod is None or inputs.shadow is None or any(
            (obj.get("metadata") or {}).get("deletionTimestamp")
            for obj in (inputs.pod, inputs.shadow)):
        return None
    return fingerprint(inputs)


class SyncedPods:
    def __init__(self, url: str, home_cluster_id: str, remote_cluster_id: str) -> None:
        # Bounded waits: an unreachable Redis must not hold the agent.
        self._client = aioredis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=5)
        self._hash = f"annex:synced-pods:{home_cluster_id}:{remote_cluster_id}"
        self._known: dict[Key, PodState] = {}
        self._changed: dict[Key, PodState | None] = {}
        self._healthy = True

    async def load(self) -> None:
        """Read every entry (an unreachable Redis leaves the cache empty)."""
        try:
            entries = await self._client.hgetall(self._hash)
        except Exception as error:  # noqa: BLE001 - the agent runs without the cache
            log.warning("Redis cache not read (every pod is reconciled): %s", error)
            return
        for field, value in entries.items():
            namespace, name = msgpack.unpackb(field)
            state = msgpack.unpackb(value)
            if isinstance(state, str):  # any other form would never match: not kept
                self._known[(namespace, name)] = state
        log.info("Redis cache: %d converged pods known", len(self._known))

    def check(self, inputs: PodInputs) -> tuple[bool, PodState | None]:
        """(whether the reconcile of the pod these are the inputs of can be skipped, its state
        now). Call it only once both clusters are listed."""
        state = pod_state(inputs)
        return state is not None and self._known.get(inputs.key) == state, state

    def reconciled(self, namespace: str, name: str, state: PodState | None) -> None:
        """A reconcile that started from `state` succeeded: its writes, if any, changed the
        resourceVersions, so only an untouched pair ever matches again."""
        key = (namespace, name)
        if state is None:
            if self._known.pop(key, None) is not None:
                self._changed[key] = None
        elif self._known.get(key) != state:
            self._known[key] = state
            self._changed[key] = state

    async def flush(self) -> None:
        """Write what changed since the last flush (dropped if Redis is unreachable: the
        cache is disposable)."""
        changed, self._changed = self._changed, {}
        if not changed:
            return
        pipeline = self._client.pipeline(transaction=False)
        stored = {msgpack.packb(list(key)): msgpack.packb(state)
                  for key, state in changed.items() if state is not None}
        gone = [msgpack.packb(list(key)) for key, state in changed.items() if state is None]
        if stored:
            pipeline.hset(self._hash, mapping=stored)
        if gone:
            pipeline.hdel(self._hash, *gone)
        try:
            await pipeline.execute()
        except Exception as error:  # noqa: BLE001 - disposable: reported once per outage
            if self._healthy:
                log.warning("Redis cache not written: %s", error)
            self._healthy = False
            return
        if not self._healthy:
            log.info("Redis cache written again")
        self._healthy = True

    async def run(self) -> None:
        try:
            while True:
                await asyncio.sleep(FLUSH_INTERVAL)
                await self.flush()
        finally:
            await self._client.aclose()
