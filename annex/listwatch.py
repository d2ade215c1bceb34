"""List and watch one resource in one scope, as client-go's Reflector does, feeding a sink.

A paged list (one unpaged list when the pages' snapshot was compacted away meanwhile, as
client-go's pager falls back to), then a watch from the list's resourceVersion, continued from
the last event's version when the server ends it, and a new list when that version expired
(410) or the watch failed (with backoff). Objects a new list no longer shows are passed on as
DELETED, with their last known identity and labels (client-go's DeletedFinalStateUnknown).
`on_listed` is called once, when the first list is in the sink: nothing is decided from a
cache still filling (Liqo #2748).

Both components keep their caches with it: the agent's mirrors, the enforcer's pods,
ShadowPods and quota usage. `list_objects` is the paged list alone, for what is listed and
not watched (the agent's Event copies at home).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

import msgpack

from annex.api_errors import WatchExpired, error_message, status_of
from annex.kubeapi import JSON, ClusterApi
from annex.mirror import discard, key_of

log = logging.getLogger(__name__)

Sink = Callable[[str, dict[str, Any]], object]
"""(event type, object): ADDED, MODIFIED or DELETED; what it returns is ignored."""
Known = dict[str, dict[str, bytes]]
"""Namespace → name → the `identity` fields beyond the key: what the sink holds from one
scope (for the deletions a list shows). No key tuples: at 50,000 pods they would double, tens
of MiB, those of the mirrors the sinks fill."""

IDENTITY = ("namespace", "name", "uid", "resourceVersion", "labels")
"""What a DELETED event made up from a list carries by default: enough to find the object and
route it (the enforcer's handlers choose by labels), and little to keep for every object."""

LIST_PAGE = 500
"""Objects per list request: a page at a time, so a large listing is never one huge body."""
WATCH_SECONDS = 300


async def list_and_watch(api: ClusterApi, path: str, sink: Sink, *,
                         query: Mapping[str, str] | None = None,
                         on_listed: Callable[[], None] | None = None,
                         identity: Sequence[str] = IDENTITY,
                         name: str = "") -> NoReturn:
    """Runs until cancelled. `path` is a collection (e.g. /api/v1/pods); `query` narrows both
    the list and the watch (labelSelector, fieldSelector); `identity`: the metadata fields a
    DELETED event made up from a list carries (namespace and name always)."""
    narrowed = dict(query or {})
    kept = tuple(field for field in identity if field not in ("namespace", "name"))
    known: Known = {}
    first, delay = True, 0.5
    while True:
        try:
            resource_version = await _list(api, path, narrowed, sink, known, kept)
            if first:
                first = False
                if on_listed is not None:
                    on_listed()
            delay = 0.5
            while True:
                async for event in api.watch(path, resource_version, WATCH_SECONDS, narrowed):
                    obj = event.get("object") or {}
                    resource_version = str((obj.get("metadata") or {}).get(
                        "resourceVersion") or resource_version)
                    event_type = str(event.get("type"))
                    if event_type == "BOOKMARK":
                        continue
                    namespace, name = key_of(obj)
                    if event_type == "DELETED":
                        discard(known, (namespace, name))
                    else:
                        known.setdefault(namespace, {})[name] = _identity(obj, kept)
                    sink(event_type, obj)
        except WatchExpired:
            log.debug("watch %s %s expired: listing again", name, path)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - listed again after a backoff
            log.warning("watch %s %s failed (retry in %.1fs): %s", name, path, delay,
                        error_message(error))
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30.0)


async def list_objects(api: ClusterApi, path: str, query: Mapping[str, str],
                       each: Callable[[dict[str, Any]], object],
                       restart: Callable[[], object], *, accept: str = JSON) -> str:
    """Every object of the collection at `path` to `each`, a page at a time (kind and
    apiVersion set: list items carry neither), in the form `accept` asks for
    (`annex.kubeapi.METADATA_LIST`: metadata only); returns the list's resourceVersion. When the
    pages' continue token expired (compacted while paging a busy cluster), paging again may
    never catch up: `restart()`, then one unpaged list, as client-go's pager falls back
    (FullListIfExpired)."""
    token = ""
    while True:
        try:
            page = await api.request("GET", path, accept=accept, query={
                **query, "limit": str(LIST_PAGE), **({"continue": token} if token else {})})
        except Exception as error:
            if not token or status_of(error) != 410:
                raise
            log.info("list %s: continue token expired, listing it whole", path)
            restart()
            page = await api.request("GET", path, query=dict(query), accept=accept)
        kind = str(page.get("kind") or "").removesuffix("List")
        for obj in page.get("items") or []:
            obj.setdefault("kind", kind)
            obj.setdefault("apiVersion", page.get("apiVersion"))
            each(obj)
        metadata = page.get("metadata") or {}
        token = str(metadata.get("continue") or "")
        if not token:
            return str(metadata.get("resourceVersion") or "")


async def _list(api: ClusterApi, path: str, query: dict[str, str], sink: Sink,
                known: Known, kept: tuple[str, ...]) -> str:
    """List every page into the sink, and what `known` holds that the list no longer shows
    as DELETED; returns the list's resourceVersion."""
    listed: dict[str, set[str]] = {}

    def each(obj: dict[str, Any]) -> None:
        namespace, name = key_of(obj)
        listed.setdefault(namespace, set()).add(name)
        known.setdefault(namespace, {})[name] = _identity(obj, kept)
        sink("ADDED", obj)

    resource_version = await list_objects(api, path, query, each, listed.clear)
    stale = [(namespace, name) for namespace, names in known.items()
             for name in names if name not in listed.get(namespace, ())]
    for namespace, name in stale:
        packed = known[namespace][name]
        discard(known, (namespace, name))
        sink("DELETED", {"metadata": {"namespace": namespace, "name": name,
                                      **(msgpack.unpackb(packed) if packed else {})}})
    return resource_version


def _identity(obj: dict[str, Any], kept: tuple[str, ...]) -> bytes:
    """The `kept` metadata fields, packed; b"" (one shared object) when there are none."""
    if not kept:
        return b""
    metadata = obj.get("metadata") or {}
    packed: bytes = msgpack.packb({k: metadata[k] for k in kept if k in metadata})
    return packed
