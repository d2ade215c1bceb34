"""Namespace controller: a terminating namespace is emptied, then its `kubernetes` finalizer is
removed through `/finalize`, after which the API server removes it (kube-controller-manager's
pkg/controller/namespace/deletion). The API server's part stays there: deletionTimestamp and the
Terminating phase on delete, refusing new content (NamespaceLifecycle), removing the namespace
once its finalizers are gone. Each pass reports on the namespace the deleter's five status
conditions, in its words."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
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
from kubesim.kinds import ResourceKind
from kubesim.store import Stored

FINALIZER = "kubernetes"
RECHECK = 0.1  # seconds between looks at what is left (pods may take their grace period)

# status_condition_utils.go: the types the deleter maintains, in order, and their "ok" variants
OK_CONDITIONS = {
    "NamespaceDeletionDiscoveryFailure": (
        "ResourcesDiscovered", "All resources successfully discovered"),
    "NamespaceDeletionGroupVersionParsingFailure": (
        "ParsedGroupVersions", "All legacy kube types successfully parsed"),
    "NamespaceDeletionContentFailure": (
        "ContentDeleted", "All content successfully deleted, may be waiting on finalization"),
    "NamespaceContentRemaining": ("ContentRemoved", "All content successfully removed"),
    "NamespaceFinalizersRemaining": ("ContentRemoved", "All content successfully removed"),
}


@dataclass
class ContentLeft:
    """What one pass of content deletion left: objects per resource, finalizers, failures."""

    resources: Counter[str] = field(default_factory=Counter)
    finalizers: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.resources or self.failures)


def failing_conditions(left: ContentLeft) -> dict[str, tuple[str, str]]:
    """(reason, message) of the conditions that report a problem (ProcessContentTotals,
    makeDeleteContentCondition); resources are named as `resource.group`, "pods." for core."""
    failing: dict[str, tuple[str, str]] = {}
    if left.failures:
        failing["NamespaceDeletionContentFailure"] = (
            "ContentDeletionFailed",
            f"Failed to delete all resource types, {len(left.failures)} remaining: "
            + ", ".join(sorted(left.failures)))
    if left.resources:
        counts = sorted(f"{resource} has {count} resource instances"
                        for resource, count in left.resources.items())
        failing["NamespaceContentRemaining"] = (
            "SomeResourcesRemain", "Some resources are remaining: " + ", ".join(counts))
    if left.finalizers:
        counts = sorted(f"{finalizer} in {count} resource instances"
                        for finalizer, count in left.finalizers.items())
        failing["NamespaceFinalizersRemaining"] = (
            "SomeFinalizerRemain", "Some finalizers are remaining: " + ", ".join(counts))
    return failing


def updated_conditions(conditions: list[dict[str, Any]], left: ContentLeft,
                       now: str) -> list[dict[str, Any]]:
    """updateConditions: each maintained type True with its problem or False with its "ok"
    words; lastTransitionTime moves only when the status does."""
    failing = failing_conditions(left)
    result = [dict(c) for c in conditions]
    for condition_type, ok in OK_CONDITIONS.items():
        status, (reason, message) = ("True", failing[condition_type]) if (
            condition_type in failing) else ("False", ok)
        current = next((c for c in result if c.get("type") == condition_type), None)
        if current is None:
            result.append({"type": condition_type, "status": status,
                           "lastTransitionTime": now, "reason": reason, "message": message})
        elif (current.get("status"), current.get("reason"), current.get("message")) != (
                status, reason, message):
            if current.get("status") != status:
                current["lastTransitionTime"] = now
            current.update(status=status, reason=reason, message=message)
    return result


def _spec_finalizers(namespace: Stored) -> list[Any]:
    return list((namespace.obj.get("spec") or {}).get("finalizers") or [])


class NamespaceController(Controller):
    name = "namespace"

    def __init__(self, api: ApiServer) -> None:
        super().__init__(api)
        self.namespaces_kind = kind_of(api, "", "v1", "namespaces")
        self.queue = WorkQueue(self._reconcile, self.name, workers=2)

    def _on_namespace(self, event_type: str, stored: Stored) -> None:
        if event_type != "DELETED" and stored.obj["metadata"].get("deletionTimestamp"):
            self.queue.add(stored.name)

    async def _delete_content(self, namespace: str) -> ContentLeft:
        """Ask every namespaced object to go, returning what is still there. As the deleter
        does, each pass deletes all of them, terminating ones too, with propagationPolicy
        Background: an object waiting for its dependents (foregroundDeletion) or orphaning them
        stops waiting, since they go with the namespace anyway."""
        left = ContentLeft()
        seen: set[tuple[str, str]] = set()
        for kind in self.api.kinds:
            if not kind.namespaced or kind.storage_key in seen or "delete" not in kind.verbs:
                continue
            seen.add(kind.storage_key)
            try:
                await self._delete_all(kind, namespace)
            except StatusError as error:
                left.failures.append(error.message)
                continue
            objects = self.api.store.list(kind.storage_key, namespace)
            if objects:
                left.resources[f"{kind.plural}.{kind.group}"] = len(objects)
                left.finalizers.update(f for s in objects
                                       for f in s.obj["metadata"].get("finalizers") or ())
        return left

    async def _delete_all(self, kind: ResourceKind, namespace: str) -> None:
        options = {"propagationPolicy": "Background"}
        if "deletecollection" in kind.verbs:
            await self.api.delete_collection(kind, namespace, options=options)
            return
        for stored in self.api.store.list(kind.storage_key, namespace):
            try:
                await self.api.delete(kind, namespace, stored.name, options=options)
            except StatusError as error:
                if error.code != 404:
                    raise

    async def _report(self, namespace: str, left: ContentLeft) -> None:
        stored = self.api.store.get(self.namespaces_kind.storage_key, "", namespace)
        if stored is None:
            return
        conditions = (stored.obj.get("status") or {}).get("conditions") or []
        updated = updated_conditions(conditions, left, now_timestamp())
        if updated == conditions:
            return
        new = copy_json(stored.obj)
        new.setdefault("status", {})["conditions"] = updated
        await self.api.update(self.namespaces_kind, "", namespace, new, subresource="status")

    async def _reconcile(self, namespace: str) -> None:
        stored = self.api.store.get(self.namespaces_kind.storage_key, "", namespace)
        if stored is None or not stored.obj["metadata"].get("deletionTimestamp"):
            return
        if FINALIZER not in _spec_finalizers(stored):
            return
        left = await self._delete_content(namespace)
        await self._report(namespace, left)
        if left:
            self.queue.add_later(namespace, RECHECK)
            return
        current = self.api.store.get(self.namespaces_kind.storage_key, "", namespace)
        if current is None:
            return
        new = copy_json(current.obj)
        new["spec"]["finalizers"] = [f for f in _spec_finalizers(current) if f != FINALIZER]
        await self.api.update(self.namespaces_kind, "", namespace, new, subresource="finalize")

    async def run(self) -> None:
        await run_together(
            watch_forever(self.api, self.namespaces_kind, self._on_namespace),
            self.queue.run(),
        )
