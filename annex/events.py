"""core/v1 Events both components post on the objects they serve, correlated as client-go's
EventRecorder does (tools/record, events_cache.go), in memory bounded by LRU caches:

- a repeat of an Event (same component, object, type, reason and message) is not posted again:
  the Event already posted gets `count` + 1 and a new `lastTimestamp` (a patch; created again,
  with its count, if it was deleted meanwhile, e.g. by the API server's TTL);
- the 10th distinct message of one reason on one object within 10 minutes turns into a combined
  Event ("(combined from similar events): ..."), which further ones update;
- an object gets at most 25 Events in a burst, then one every 5 minutes (its long tail of
  repeats costs the API server little);
- what was posted is remembered in caches of `cache_size` entries each, least recently used
  dropped first (cachetools' LRUCache): memory does not grow with the number of objects ever
  reported. A forgotten
  Event is posted afresh when it comes again.
An Event is best effort: a failure to post it is a log line, never the caller's failure.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from cachetools import LRUCache

from annex.api_errors import error_message, is_not_found
from annex.api_paths import core_path
from annex.kubeapi import ClusterApi
from shared.api.builtin import EVENTS

log = logging.getLogger(__name__)

CACHE_SIZE = 4096
"""Entries of each cache (client-go's maxLruCacheEntries)."""
SPAM_BURST = 25
SPAM_INTERVAL = 300.0
"""Seconds per Event an object earns back once its burst is spent."""
AGGREGATE_MAX_MESSAGES = 10
AGGREGATE_INTERVAL = 600.0
"""Seconds after which one reason's distinct messages on an object are counted afresh."""
AGGREGATE_PREFIX = "(combined from similar events): "
MESSAGE_LIMIT = 1024
"""Characters of a message kept (an Event note's limit)."""

@dataclass
class _Posted:
    """An Event as last posted: what its repeat updates."""

    name: str
    count: int
    first_timestamp: str


@dataclass
class _Messages:
    """One reason's distinct messages on an object, since `last` minus the interval."""

    last: float
    messages: set[str] = field(default_factory=set)


@dataclass
class _Budget:
    """An object's token bucket."""

    tokens: float
    updated: float


@dataclass(frozen=True)
class Correlated:
    """What to write for one Event: `event` to create, or first `patch` on the one of that name
    when it is a repeat."""

    key: tuple[Any, ...]
    event: dict[str, Any]
    patch: dict[str, Any] | None


def _object_key(event: Mapping[str, Any]) -> tuple[Any, ...]:
    involved = event["involvedObject"]
    return (event["source"]["component"], involved.get("kind"), involved.get("namespace"),
            involved.get("name"), involved.get("uid"), involved.get("apiVersion"))


class EventCorrelator:
    """Decides, for each Event, whether and how it is written (client-go's EventCorrelator:
    aggregate, count, then filter spam). No I/O; `clock` measures the intervals."""

    def __init__(self, cache_size: int = CACHE_SIZE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._posted: LRUCache[tuple[Any, ...], _Posted] = LRUCache(cache_size)
        self._messages: LRUCache[tuple[Any, ...], _Messages] = LRUCache(cache_size)
        self._budgets: LRUCache[tuple[Any, ...], _Budget] = LRUCache(cache_size)

    def entries(self) -> int:
        """Entries held in all caches (at most three times the cache size)."""
        return len(self._posted) + len(self._messages) + len(self._budgets)

    def correlate(self, event: dict[str, Any]) -> Correlated | None:
        """How to write `event` (a new core/v1 Event, count 1); None when the object has spent
        its budget."""
        now = self._clock()
        event, key = self._aggregate(event, now)
        correlated = self._observe(event, key)
        return correlated if self._within_budget(_object_key(event), now) else None

    def written(self, key: tuple[Any, ...], event: Mapping[str, Any]) -> None:
        """The API server's answer to a write: its name and count are what a repeat updates."""
        metadata = event.get("metadata") or {}
        self._posted[key] = _Posted(str(metadata.get("name")), int(event.get("count") or 1),
                                    str(event.get("firstTimestamp")))

    def _aggregate(self, event: dict[str, Any],
                   now: float) -> tuple[dict[str, Any], tuple[Any, ...]]:
        group = (*_object_key(event), event.get("type"), event.get("reason"),
                 event.get("reportingInstance"))
        record = self._messages.get(group)
        if record is None or now - record.last > AGGREGATE_INTERVAL:
            record = _Messages(now)
        record.messages.add(str(event.get("message")))
        record.last = now
        self._messages[group] = record
        if len(record.messages) < AGGREGATE_MAX_MESSAGES:
            return event, (*group, event.get("message"))
        record.messages.pop()  # the set never grows past the threshold
        combined = f"{AGGREGATE_PREFIX}{event.get('message')}"[:MESSAGE_LIMIT]
        return {**event, "message": combined}, group

    def _observe(self, event: dict[str, Any], key: tuple[Any, ...]) -> Correlated:
        last = self._posted.get(key)
        if last is None:
            self._posted[key] = _Posted(event["metadata"]["name"], 1,
                                        str(event.get("firstTimestamp")))
            return Correlated(key, event, None)
        count = last.count + 1
        repeat = {**event, "metadata": {**event["metadata"], "name": last.name},
                  "firstTimestamp": last.first_timestamp, "count": count}
        self._posted[key] = _Posted(last.name, count, last.first_timestamp)
        patch = {"count": count, "lastTimestamp": event.get("lastTimestamp"),
                 "message": event.get("message")}
        return Correlated(key, repeat, patch)

    def _within_budget(self, key: tuple[Any, ...], now: float) -> bool:
        budget = self._budgets.get(key) or _Budget(float(SPAM_BURST), now)
        budget.tokens = min(float(SPAM_BURST),
                            budget.tokens + (now - budget.updated) / SPAM_INTERVAL)
        budget.updated = now
        allowed = budget.tokens >= 1
        if allowed:
            budget.tokens -= 1
        self._budgets[key] = budget
        return allowed


class EventRecorder:
    """Posts the Events of one component (`component`, and `instance`: which of its processes
    or peerings) through `api`."""

    def __init__(self, api: ClusterApi, component: str, instance: str = "", *,
                 correlator: EventCorrelator | None = None) -> None:
        self._api = api
        self._component = component
        self._instance = instance
        self.correlator = correlator or EventCorrelator()

    def event(self, obj: Mapping[str, Any], reason: str, message: str,
              event_type: str) -> dict[str, Any]:
        """A new Event on `obj` (which carries its kind and apiVersion, as the watches' do)."""
        metadata = obj.get("metadata") or {}
        namespace = str(metadata.get("namespace") or "default")
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        involved = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                    "namespace": namespace, "name": metadata.get("name"),
                    "uid": metadata.get("uid")}
        if metadata.get("resourceVersion"):
            involved["resourceVersion"] = metadata["resourceVersion"]
        event: dict[str, Any] = {
            **EVENTS.type_meta(),
            "metadata": {"name": f"{metadata.get('name')}.{uuid.uuid4().hex[:16]}",
                         "namespace": namespace},
            "involvedObject": involved,
            "reason": reason, "message": message[:MESSAGE_LIMIT], "type": event_type,
            "source": {"component": self._component}, "reportingComponent": self._component,
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }
        if self._instance:
            event["reportingInstance"] = self._instance
        return event

    async def record(self, obj: Mapping[str, Any], reason: str, message: str,
                     event_type: str = "Warning") -> None:
        """Post an Event on `obj`, or count a repeat on the one posted before."""
        correlated = self.correlator.correlate(self.event(obj, reason, message, event_type))
        if correlated is None:
            log.debug("event %s on %s dropped: the object's event budget is spent", reason,
                      (obj.get("metadata") or {}).get("name"))
            return
        event = correlated.event
        namespace, name = event["metadata"]["namespace"], event["metadata"]["name"]
        try:
            written = await self._write(correlated, namespace, name)
        except Exception as error:  # noqa: BLE001 - an Event is best effort
            log.warning("could not record event %s on %s/%s: %s", reason, namespace,
                        event["involvedObject"].get("name"), error_message(error))
            return
        self.correlator.written(correlated.key, {**event, **written})

    async def _write(self, correlated: Correlated, namespace: str, name: str) -> Mapping[str, Any]:
        if correlated.patch is not None:
            try:
                patched = await self._api.patch(core_path("events", namespace, name),
                                                correlated.patch)
                return patched if isinstance(patched, Mapping) else correlated.event
            except Exception as error:
                if not is_not_found(error):
                    raise
                # Gone (the API server's TTL, someone's delete): posted again, count kept.
        created = await self._api.create(core_path("events", namespace), correlated.event)
        return created if isinstance(created, Mapping) else correlated.event
