"""The optional Redis cache (`--redis-url`) of the pods last found converged, so that a restarted
agent skips the pods unchanged since (docs/benchmarks.md, "Redis").

Per pod key it keeps, msgpack-encoded in one Redis hash, the state a successful reconcile
started from: the home pod's and the ShadowPod's resourceVersions, the twin namespace, and a
fingerprint of every other input of the reconcile (the agent's flags, the VirtualNodes, the
NamespaceMap). It is read once, after both clusters are listed, and only ever to skip a
reconcile whose inputs are exactly those: nothing is done from it (Liqo #2748). Lost, stale or
unreachable, it costs only the reconciles it would have saved: the agent runs without it.

A new input of the pod reconcile (another mirror it reads) must join `fingerprint`, else a
restarted agent with Redis would skip the pods that input changed.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from dataclasses import fields
from typing import Any

import msgpack
import redis.asyncio as aioredis

from annex.mirror import Key
from home_agent.agent import Agent

log = logging.getLogger(__name__)

FLUSH_INTERVAL = 1.0
"""Seconds between batched writes to Redis (one pipeline each)."""

PodState = tuple[str, str, str, str]
"""(pod resourceVersion, twin namespace, ShadowPod resourceVersion, fingerprint)."""


def _version(obj: dict[str, Any] | None) -> str | None:
    """The object's resourceVersion, or None when it is absent or being deleted."""
    metadata = (obj or {}).get("metadata") or {}
    if obj is None or metadata.get("deletionTimestamp"):
        return None
    return str(metadata.get("resourceVersion") or "")


NOT_POD_INPUTS = frozenset({
    "remote_kubeconfig", "home_kubeconfig", "lease_renew_interval", "lease_duration_seconds",
    "health_check_interval", "health_check_timeout", "failure_threshold", "home_limits",
    "remote_limits", "workers", "redis_url", "metrics_address", "metrics_secure",
    "webhook_address", "webhook_cert", "webhook_key", "log_format", "log_level",
    "reflection_workers", "reflection_types", "token_refresh_fraction", "leader_election"})
"""Flags a pod reconcile never reads. Any other flag (a new one included) is in the
fingerprint: changing it means every pod is reconciled again."""


def fingerprint(agent: Agent) -> str:
    """Changes whenever an input of a pod reconcile besides the pod and its ShadowPod does."""
    namespace_map = agent.mirrors.namespace_maps.get(
        (agent.tenant_namespace, agent.namespace_map_name))
    flags = {f.name: getattr(agent.config, f.name) for f in fields(agent.config)
             if f.name not in NOT_POD_INPUTS}
    inputs = [sorted(flags.items()), _version(namespace_map),
              sorted((str((vn.get("metadata") or {}).get("name")), _version(vn))
                     for vn in agent.mirrors.virtual_nodes.values())]
    return hashlib.blake2b(repr(inputs).encode(), digest_size=16).hexdigest()


def pod_state(agent: Agent, namespace: str, name: str, fingerprint: str) -> PodState | None:
    """The state a converged pod reconcile starts from: pod and ShadowPod both there and
    neither being deleted (None otherwise: only such states are cached)."""
    twin = agent.twins.mapped(namespace)
    if twin is None:
        return None
    pod = _version(agent.mirrors.pods.get((namespace, name)))
    shadow = _version(agent.mirrors.shadow_pods.get((twin, name)))
    if pod is None or shadow is None:
        return None
    return (pod, twin, shadow, fingerprint)


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
            self._known[(namespace, name)] = tuple(msgpack.unpackb(value))
        log.info("Redis cache: %d converged pods known", len(self._known))

    def check(self, agent: Agent, namespace: str, name: str) -> tuple[bool, PodState | None]:
        """(whether the pod's reconcile can be skipped, its state now). Call it only once both
        clusters are listed."""
        state = pod_state(agent, namespace, name, fingerprint(agent))
        return state is not None and self._known.get((namespace, name)) == state, state

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
        stored = {msgpack.packb(list(key)): msgpack.packb(list(state))
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
