"""`RemoteApi`: the part of `kubesim.apiserver.ApiServer` that kubesim's in-process components
(its kubelet, `watch_forever`, `record_event`) use, served by a real API server over HTTPS, so
the same code runs against kube-apiserver.

Reads (`store.get`, `store.list`, `open_watch`) come from a cache of the kinds it is told to
watch (list, then watch, relisting after 410 Gone, as an informer does); writes go to the
server and their answers into the cache at once, so the next read sees them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp

from kubesim.apiserver import RequestAttributes
from kubesim.errors import StatusError
from kubesim.kinds import KindRegistry, ResourceKind
from kubesim.store import Stored, storage_order

log = logging.getLogger("tests.envtest")
Key = tuple[str, str]  # (namespace, name)
StorageKey = tuple[str, str]


class Cache:
    """The watched kinds' objects by storage key, as `kubesim.store.Store` answers reads."""

    def __init__(self) -> None:
        self.objects: dict[StorageKey, dict[Key, Stored]] = {}
        self._seen: dict[StorageKey, dict[Key, int]] = {}  # last resourceVersion, deletes too
        self.subscribers: dict[StorageKey, list[asyncio.Queue[tuple[str, Stored]]]] = {}

    def get(self, storage_key: StorageKey, namespace: str, name: str) -> Stored | None:
        return self.objects.get(storage_key, {}).get((namespace, name))

    def list(self, storage_key: StorageKey, namespace: str = "") -> list[Stored]:
        return [s for (ns, _), s in self.objects.get(storage_key, {}).items()
                if not namespace or ns == namespace]

    def iterate(self, storage_key: StorageKey, namespace: str = "",
                after: str = "") -> Iterator[Stored]:
        """`Store.iterate`: in list order, from just after the position `after`."""
        for position, stored in sorted((storage_order(s.namespace, s.name), s)
                                       for s in self.list(storage_key, namespace)):
            if position > after:
                yield stored

    def apply(self, storage_key: StorageKey, event_type: str, obj: dict[str, Any]) -> None:
        """One object's new state (a watch event or a write's answer), unless older than what
        the cache has seen of it."""
        metadata = obj.get("metadata") or {}
        key = (metadata.get("namespace") or "", metadata.get("name") or "")
        rv = int(metadata.get("resourceVersion") or 0)
        seen = self._seen.setdefault(storage_key, {})
        if rv and (rv < seen.get(key, 0) or (rv == seen.get(key) and event_type != "DELETED")):
            return  # older, or what a write's answer already put here
        seen[key] = rv
        stored = Stored.of(obj, rv)
        objects = self.objects.setdefault(storage_key, {})
        if event_type == "DELETED":
            if objects.pop(key, None) is None:
                return
        else:
            event_type = "MODIFIED" if key in objects else "ADDED"
            objects[key] = stored
        for queue in self.subscribers.get(storage_key, []):
            queue.put_nowait((event_type, stored))


class CacheWatch:
    """A watch of the cache: the current state (`backlog`), then every change."""

    def __init__(self, cache: Cache, storage_key: StorageKey, namespace: str) -> None:
        self.namespace = namespace
        self.backlog = [("ADDED", s) for s in cache.list(storage_key, namespace)]
        self._queue: asyncio.Queue[tuple[str, Stored]] = asyncio.Queue()
        self._subscribers = cache.subscribers.setdefault(storage_key, [])
        self._subscribers.append(self._queue)

    async def __aiter__(self) -> AsyncIterator[tuple[str, Stored]]:
        try:
            for event in self.backlog:
                yield event
            while True:
                event = await self._queue.get()
                if not self.namespace or event[1].namespace == self.namespace:
                    yield event
        finally:
            self._subscribers.remove(self._queue)


class MastersOnly:
    """The stand-in kubelets' authorization: the API server's kubelet client certificate (in
    system:masters, as kubeadm issues it) may do anything; nobody else anything. A real
    kubelet asks the API server (SubjectAccessReview), which grants system:masters all."""

    def authorize(self, attributes: RequestAttributes) -> tuple[bool, str]:
        if "system:masters" in attributes.user.groups:
            return True, ""
        return False, f"{attributes.user.name} is not allowed to use the kubelet API"


def _path(kind: ResourceKind, namespace: str, name: str = "", subresource: str = "") -> str:
    path = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
    if kind.namespaced and namespace:
        path += f"/namespaces/{quote(namespace)}"
    path += f"/{kind.plural}"
    if name:
        path += f"/{quote(name)}"
    if subresource:
        path += f"/{subresource}"
    return path


class RemoteApi:
    def __init__(self, url: str, ca: Path, certificate: Path, key: Path,
                 watched: tuple[tuple[str, str, str, str], ...]) -> None:
        """`watched`: (group, version, plural, namespace or "") of each kind to cache."""
        self.url = url
        self.kinds = KindRegistry()
        self.store = Cache()
        self.authorizer = MastersOnly()
        self.server_minor = 0
        self._context = ssl.create_default_context(cafile=str(ca))
        self._context.load_cert_chain(str(certificate), str(key))
        self._watched = watched
        self._cached_keys = {kind.storage_key for group, version, plural, _ in watched
                             if (kind := self.kinds.get(group, version, plural)) is not None}
        self._session: aiohttp.ClientSession | None = None
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Connect, and fill the cache of every watched kind before returning."""
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self._context, limit=20))
        version = await self._request("GET", "/version")
        # gitVersion: "minor" is empty in builds that do not stamp it
        found = re.match(r"v\d+\.(\d+)", version.get("gitVersion", ""))
        self.server_minor = int(found.group(1)) if found else 0
        synced = []
        for group, version_, plural, namespace in self._watched:
            kind = self.kinds.get(group, version_, plural)
            assert kind is not None, plural
            done = asyncio.Event()
            synced.append(done.wait())
            self._tasks.append(asyncio.create_task(self._inform(kind, namespace, done)))
        await asyncio.gather(*synced)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()

    # ------------------------------------------------------------------ the informers
    async def _inform(self, kind: ResourceKind, namespace: str, synced: asyncio.Event) -> None:
        while True:
            try:
                listing = await self._request("GET", _path(kind, namespace))
                self._replace(kind, namespace, listing.get("items") or [])
                synced.set()
                await self._watch(kind, namespace, listing["metadata"]["resourceVersion"])
            except asyncio.CancelledError:
                raise
            except Exception as error:  # relist, as an informer does after any failure
                log.debug("watch of %s failed (%s); listing again", kind.plural, error)
                await asyncio.sleep(0.5)

    def _replace(self, kind: ResourceKind, namespace: str, items: list[dict[str, Any]]) -> None:
        listed = set()
        for item in items:
            item = {"apiVersion": kind.api_version, "kind": kind.kind, **item}
            listed.add((item["metadata"].get("namespace") or "", item["metadata"]["name"]))
            self.store.apply(kind.storage_key, "MODIFIED", item)
        for stored in self.store.list(kind.storage_key, namespace):
            if (stored.namespace, stored.name) not in listed:
                self.store.apply(kind.storage_key, "DELETED", stored.obj)

    async def _watch(self, kind: ResourceKind, namespace: str, resource_version: str) -> None:
        assert self._session is not None
        while True:
            query = urlencode({"watch": "1", "resourceVersion": resource_version,
                               "allowWatchBookmarks": "true", "timeoutSeconds": "300"})
            async with self._session.get(f"{self.url}{_path(kind, namespace)}?{query}",
                                         timeout=aiohttp.ClientTimeout(total=None)) as answer:
                if answer.status != 200:
                    raise StatusError(answer.status, "", await answer.text())
                async for line in answer.content:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    obj = event["object"]
                    if event["type"] == "ERROR":
                        raise StatusError(obj.get("code", 500), obj.get("reason", ""),
                                          obj.get("message", ""))
                    resource_version = obj["metadata"]["resourceVersion"]
                    if event["type"] != "BOOKMARK":
                        self.store.apply(kind.storage_key, event["type"], obj)

    # ------------------------------------------------------------ what ApiServer offers
    def register_subresource(self, kind: ResourceKind, name: str, handler: Any) -> None:
        """The real API server serves pods/log itself, from the kubelet API."""

    def open_watch(self, kind: ResourceKind, namespace: str, *, resource_version: str = "",
                   field_selector: str = "") -> CacheWatch:
        if field_selector:
            raise NotImplementedError("field selectors are not cached")
        return CacheWatch(self.store, kind.storage_key, namespace)

    async def get(self, kind: ResourceKind, namespace: str, name: str, *,
                  subresource: str = "") -> dict[str, Any]:
        return await self._request("GET", _path(kind, namespace, name, subresource))

    async def create(self, kind: ResourceKind, namespace: str, body: dict[str, Any], *,
                     subresource: str = "") -> dict[str, Any]:
        name = body.get("metadata", {}).get("name", "") if subresource else ""
        return self._cached(kind, await self._request(
            "POST", _path(kind, namespace, name, subresource), body))

    async def update(self, kind: ResourceKind, namespace: str, name: str, body: dict[str, Any],
                     *, subresource: str = "") -> dict[str, Any]:
        return self._cached(kind, await self._request(
            "PUT", _path(kind, namespace, name, subresource), body))

    async def delete(self, kind: ResourceKind, namespace: str, name: str, *,
                     options: dict[str, Any] | None = None) -> dict[str, Any]:
        answer = await self._request("DELETE", _path(kind, namespace, name), options or {})
        if answer.get("kind") == kind.kind and (options or {}).get("gracePeriodSeconds") == 0 \
                and not answer["metadata"].get("finalizers"):
            self.store.apply(kind.storage_key, "DELETED", answer)  # gone at once
        return answer

    def _cached(self, kind: ResourceKind, obj: dict[str, Any]) -> dict[str, Any]:
        if obj.get("kind") == kind.kind and kind.storage_key in self._cached_keys:
            self.store.apply(kind.storage_key, "MODIFIED", obj)
        return obj

    async def _request(self, method: str, path: str,
                       body: dict[str, Any] | None = None) -> dict[str, Any]:
        assert self._session is not None
        async with self._session.request(
                method, f"{self.url}{path}", json=body,
                timeout=aiohttp.ClientTimeout(total=30)) as answer:
            text = await answer.text()
            data: dict[str, Any] = {}
            with contextlib.suppress(ValueError):
                data = json.loads(text) if text else {}
            if answer.status >= 400:
                raise StatusError(answer.status, data.get("reason", ""),
                                  data.get("message", text), data.get("details"))
            return data
