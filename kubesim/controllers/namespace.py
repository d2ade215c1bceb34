"""Namespace lifecycle: a terminating namespace is emptied, then its `kubernetes` finalizer is
removed through `/finalize`, after which the API server removes it (as the namespace controller
of kube-controller-manager does). While content remains, the namespace carries the
NamespaceContentRemaining condition with the real controller's wording."""

from __future__ import annotations

from typing import Any

from kubesim.apiserver import ApiServer, copy_json, now_timestamp
from kubesim.controllers.base import (
    Controller,
    WorkQueue,
    kind_of,
    run_together,
    watch_forever,
)
from kubesim.errors import StatusError
from kubesim.store import Stored

FINALIZER = "kubernetes"
RECHECK = 0.1  # seconds between looks at what is left (pods may take their grace period)


class NamespaceController(Controller):
    name = "namespace"

    def __init__(self, api: ApiServer) -> None:
        super().__init__(api)
        self.namespaces_kind = kind_of(api, "", "v1", "namespaces")
        self.queue = WorkQueue(self._reconcile, self.name, workers=2)

    def _on_namespace(self, event_type: str, stored: Stored) -> None:
        if event_type != "DELETED" and stored.obj["metadata"].get("deletionTimestamp"):
            self.queue.add(stored.name)

    async def _delete_content(self, namespace: str) -> dict[str, int]:
        """Ask every namespaced object to go; returns what is still there, per resource."""
        remaining: dict[str, int] = {}
        seen: set[tuple[str, str]] = set()
        for kind in self.api.kinds:
            if not kind.namespaced or kind.storage_key in seen:
                continue
            seen.add(kind.storage_key)
            objects = self.api.store.list(kind.storage_key, namespace)
            if not objects:
                continue
            remaining[kind.group_resource] = len(objects)
            for stored in objects:
                if stored.obj["metadata"].get("deletionTimestamp"):
                    continue
                try:
                    await self.api.delete(kind, namespace, stored.name,
                                          options={"propagationPolicy": "Background"})
                except StatusError as error:
                    if error.code not in (404, 409):
                        raise
        return remaining

    async def _set_remaining_condition(self, stored: Stored, remaining: dict[str, int]) -> None:
        if remaining:
            counts = ", ".join(f"{resource} has {count} resource instances"
                               for resource, count in sorted(remaining.items()))
            condition = {"type": "NamespaceContentRemaining", "status": "True",
                         "reason": "SomeResourcesRemain",
                         "message": f"Some resources are remaining: {counts}"}
        else:
            condition = {"type": "NamespaceContentRemaining", "status": "False",
                         "reason": "ContentRemoved", "message": "All content successfully removed"}
        conditions = (stored.obj.get("status") or {}).get("conditions") or []
        current: dict[str, Any] = next(
            (c for c in conditions if c.get("type") == condition["type"]), {})
        if all(current.get(k) == v for k, v in condition.items()):
            return
        new = copy_json(stored.obj)
        condition["lastTransitionTime"] = now_timestamp()
        new["status"]["conditions"] = [
            *(c for c in conditions if c.get("type") != condition["type"]), condition]
        await self.api.update(self.namespaces_kind, "", stored.name, new, subresource="status")

    async def _reconcile(self, namespace: str) -> None:
        stored = self.api.store.get(self.namespaces_kind.storage_key, "", namespace)
        if stored is None or not stored.obj["metadata"].get("deletionTimestamp"):
            return
        finalizers: list[Any] = (stored.obj.get("spec") or {}).get("finalizers") or []
        if FINALIZER not in finalizers:
            return
        remaining = await self._delete_content(namespace)
        await self._set_remaining_condition(stored, remaining)
        if remaining:
            self.queue.add_later(namespace, RECHECK)
            return
        current = self.api.store.get(self.namespaces_kind.storage_key, "", namespace)
        if current is None:
            return
        new = copy_json(current.obj)
        new["spec"]["finalizers"] = [f for f in finalizers if f != FINALIZER]
        await self.api.update(self.namespaces_kind, "", namespace, new, subresource="finalize")

    async def run(self) -> None:
        await run_together(
            watch_forever(self.api, self.namespaces_kind, self._on_namespace),
            self.queue.run(),
        )
