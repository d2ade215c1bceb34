"""Garbage collector: the API server cascades deletions through ownerReferences as soon as an
owner goes (`ApiServer.garbage_collection`, background and foreground); this controller adds what
the real collector also does for objects whose owners never existed or vanished unseen: an object
all of whose owners are absent is deleted (background), references to absent owners are
dropped from objects that keep at least one live owner, and a foreground deletion whose
finishing write was refused is tried again."""

from __future__ import annotations

import asyncio
from typing import Any

from kubesim.apiserver import ApiServer, copy_json
from kubesim.controllers.base import Controller
from kubesim.errors import StatusError
from kubesim.store import Stored

SWEEP_INTERVAL = 1.0  # seconds between sweeps for dangling owner references


class GarbageCollector(Controller):
    name = "garbage-collector"

    def __init__(self, api: ApiServer, interval: float = SWEEP_INTERVAL) -> None:
        super().__init__(api)
        self.interval = interval

    def _dangling(self) -> list[tuple[Any, Stored, list[str]]]:
        """(kind, object, absent owner uids) for objects with at least one absent owner; found
        through the store's owner index, so a sweep costs the absent owners, not every object."""
        found: dict[tuple[Any, str, str], tuple[Any, Stored, list[str]]] = {}
        for owner in self.api.store.absent_owners():
            for key, namespace, name in self.api.store.dependents(owner):
                kind = self.api.kinds.by_storage(key)
                stored = self.api.store.get(key, namespace, name)
                if kind is None or stored is None or (key, namespace, name) in found:
                    continue
                references = stored.obj["metadata"].get("ownerReferences") or []
                absent = [r.get("uid", "") for r in references
                          if not self.api.store.uid_exists(r.get("uid", ""))]
                found[(key, namespace, name)] = (kind, stored, absent)
        return list(found.values())

    async def sweep(self) -> None:
        for kind, stored, absent in self._dangling():
            references = stored.obj["metadata"].get("ownerReferences") or []
            try:
                if len(absent) == len(references):
                    if not stored.obj["metadata"].get("deletionTimestamp"):
                        await self.api.delete(kind, stored.namespace, stored.name,
                                              options={"propagationPolicy": "Background"})
                else:
                    new = copy_json(stored.obj)
                    new["metadata"]["ownerReferences"] = [
                        r for r in references if r.get("uid") not in absent]
                    await self.api.update(kind, stored.namespace, stored.name, new)
            except StatusError as error:
                if error.code not in (404, 409):
                    raise

    async def run(self) -> None:
        swept_at = -1
        while True:
            # a reference can only dangle after some write: an idle cluster is not rescanned
            if self.api.store.resource_version != swept_at:
                swept_at = self.api.store.resource_version
                await self.sweep()
            self.api.retry_foreground()
            await asyncio.sleep(self.interval)
