"""Garbage collector: everything kube-controller-manager's collector does with ownerReferences.

The API server only records the intent of a delete (`ApiServer.delete_stored` adds `orphan` or
`foregroundDeletion` per propagationPolicy); this controller acts on it, as
pkg/controller/garbagecollector does:
- the graph builder: every event of every kind (the store's listener, as the collector's
  informers see all resources) queues the objects it may affect: the dependents of a removed
  object and its owners waiting for it, an object with an owner that does not exist, an owner
  whose blocking reference went away, an owner that starts waiting for its dependents;
- attemptToDeleteItem: an object whose owners are all gone or waiting for their dependents is
  deleted (in the foreground when a waiting owner should also wait for its own dependents),
  and references to such owners are dropped from an object that keeps a live owner;
- processDeletingDependentsItem: an owner deleted in the foreground loses its
  `foregroundDeletion` finalizer once no dependent with blockOwnerDeletion is left in storage,
  and until then its blocking dependents are collected (a dependent made meanwhile too);
- attemptToOrphan: an owner deleted with `orphan` has its dependents' references to it dropped,
  then the finalizer.
A write that fails (a conflict, a webhook refusing) is retried by the work queue.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubesim.apiserver import FOREGROUND_FINALIZER as FOREGROUND
from kubesim.apiserver import ORPHAN_FINALIZER as ORPHAN
from kubesim.apiserver import ApiServer, copy_json
from kubesim.controllers.base import Controller, WorkQueue, run_together
from kubesim.kinds import ResourceKind
from kubesim.store import ADDED, DELETED, Event, Ident, Stored

WORKERS = 4  # kube-controller-manager's --concurrent-gc-syncs is 20
# DefaultIgnoredResources: Events are neither collected nor waited for
IGNORED = frozenset({("", "events"), ("events.k8s.io", "events")})

Reference = dict[str, Any]


def being_deleted(obj: dict[str, Any]) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def has_finalizer(obj: dict[str, Any], finalizer: str) -> bool:
    return finalizer in (obj["metadata"].get("finalizers") or ())


def deleting_dependents(obj: dict[str, Any]) -> bool:
    """Deleted in the foreground and still waiting for its dependents."""
    return being_deleted(obj) and has_finalizer(obj, FOREGROUND)


def blocks(reference: Reference) -> bool:
    return bool(reference.get("blockOwnerDeletion"))


def starts_waiting(old: dict[str, Any] | None, new: dict[str, Any], finalizer: str) -> bool:
    """deletionStartsWithFinalizer: deleting with `finalizer` now, and not before."""
    if not (being_deleted(new) and has_finalizer(new, finalizer)):
        return False
    return old is None or not (being_deleted(old) and has_finalizer(old, finalizer))


def _references(obj: dict[str, Any]) -> list[Reference]:
    return list(obj["metadata"].get("ownerReferences") or [])


def unblocked_owners(old: list[Reference], new: list[Reference]) -> list[str]:
    """Owner uids a blocking reference to which was removed or stopped blocking."""
    now = {r.get("uid", ""): r for r in new}
    return [r.get("uid", "") for r in old
            if blocks(r) and not blocks(now.get(r.get("uid", ""), {}))]


class GarbageCollector(Controller):
    name = "garbage-collector"

    def __init__(self, api: ApiServer) -> None:
        super().__init__(api)
        self.attempt_to_delete = WorkQueue(self._attempt_to_delete, self.name, WORKERS)
        self.attempt_to_orphan = WorkQueue(self._attempt_to_orphan, self.name, WORKERS)

    # ------------------------------------------------------------------------ graph builder
    def _observe(self, event: Event) -> None:
        if event.key in IGNORED:
            return
        obj = event.new.obj
        uid = obj["metadata"].get("uid", "")
        if event.type == DELETED:
            for ident in self._dependents(uid):
                self.attempt_to_delete.add(ident)
            for reference in _references(obj):
                owner = self._located(reference.get("uid", ""))
                if owner is not None and deleting_dependents(owner.obj):
                    self._add_owner(reference.get("uid", ""))
            return
        ident = (event.key, event.new.namespace, event.new.name)
        old = event.old.obj if event.old is not None else None
        old_references = _references(old) if old is not None else []
        references = _references(obj)
        for owner_uid in unblocked_owners(old_references, references):
            self._add_owner(owner_uid)
        known = {r.get("uid") for r in old_references}
        if any(self._owner(r, event.new) is None for r in references if r.get("uid") not in known):
            self.attempt_to_delete.add(ident)  # an owner it names does not exist
        if starts_waiting(old, obj, ORPHAN):
            self.attempt_to_orphan.add(ident)
        elif starts_waiting(old, obj, FOREGROUND):
            for dependent in self._dependents(uid):
                self.attempt_to_delete.add(dependent)
            self.attempt_to_delete.add(ident)

    def _dependents(self, uid: str) -> list[Ident]:
        return [ident for ident in self.api.store.dependents(uid) if ident[0] not in IGNORED]

    def _add_owner(self, uid: str) -> None:
        located = self.api.store.locate_uid(uid)
        if located is not None:
            self.attempt_to_delete.add(located)

    def _located(self, uid: str) -> Stored | None:
        located = self.api.store.locate_uid(uid)
        return self.api.store.get(*located) if located is not None else None

    def _owner(self, reference: Reference, dependent: Stored) -> Stored | None:
        """The object a reference names, or None when it dangles (isDangling: the collector
        looks the owner up by kind and name, in the dependent's namespace, and compares uids)."""
        located = self.api.store.locate_uid(reference.get("uid", ""))
        if located is None:
            return None
        key, namespace, name = located
        kind = self.api.kinds.by_storage(key)
        group = str(reference.get("apiVersion", "")).rpartition("/")[0]
        if (kind is None or name != reference.get("name") or kind.kind != reference.get("kind")
                or group != kind.group or (namespace and namespace != dependent.namespace)):
            return None
        return self.api.store.get(key, namespace, name)

    # ---------------------------------------------------------------------- attempt to delete
    def _current(self, ident: Ident) -> tuple[ResourceKind, Stored] | None:
        key, namespace, name = ident
        kind = self.api.kinds.by_storage(key)
        item = self.api.store.get(key, namespace, name)
        return (kind, item) if kind is not None and item is not None else None

    async def _attempt_to_delete(self, ident: Ident) -> None:
        current = self._current(ident)
        if current is None:
            return  # gone: its removal queued its dependents already
        kind, item = current
        if deleting_dependents(item.obj):
            await self._process_deleting_dependents(kind, item)
            return
        if being_deleted(item.obj):
            return  # a one-way trip: its dependents are seen to when it is gone
        references = _references(item.obj)
        if not references:
            return
        solid: list[Reference] = []
        gone: list[tuple[Reference, Stored | None]] = []  # dangling, or owner waiting
        for reference in references:
            owner = self._owner(reference, item)
            if owner is not None and not deleting_dependents(owner.obj):
                solid.append(reference)
            else:
                gone.append((reference, owner))
        if solid:
            if gone:
                await self._drop_references(kind, item, {r.get("uid") for r, _ in gone})
            return
        waiting = any(owner is not None for _, owner in gone)
        if waiting and self._dependents(item.obj["metadata"].get("uid", "")):
            policy = "Foreground"  # its waiting owner waits for its dependents too
        elif has_finalizer(item.obj, ORPHAN):
            policy = "Orphan"
        elif has_finalizer(item.obj, FOREGROUND):
            policy = "Foreground"
        else:
            policy = "Background"
        await self.api.delete(kind, item.namespace, item.name, options={
            "propagationPolicy": policy,
            "preconditions": {"uid": item.obj["metadata"].get("uid")}})

    async def _process_deleting_dependents(self, kind: ResourceKind, owner: Stored) -> None:
        uid = owner.obj["metadata"].get("uid", "")
        blocking = [ident for ident in self._dependents(uid)
                    if (dependent := self.api.store.get(*ident)) is not None
                    and any(r.get("uid") == uid and blocks(r) for r in _references(dependent.obj))]
        if not blocking:
            await self._remove_finalizer(kind, owner, FOREGROUND)
            return
        for ident in blocking:
            dependent = self.api.store.get(*ident)
            if dependent is not None and not deleting_dependents(dependent.obj):
                self.attempt_to_delete.add(ident)

    # ---------------------------------------------------------------------- attempt to orphan
    async def _attempt_to_orphan(self, ident: Ident) -> None:
        current = self._current(ident)
        if current is None:
            return
        kind, owner = current
        if not (being_deleted(owner.obj) and has_finalizer(owner.obj, ORPHAN)):
            return
        uid = owner.obj["metadata"].get("uid", "")
        for dependent_ident in self._dependents(uid):
            dependent = self._current(dependent_ident)
            if dependent is not None:
                await self._drop_references(*dependent, {uid})
        await self._remove_finalizer(kind, owner, ORPHAN)

    # ------------------------------------------------------------------------------- writes
    async def _drop_references(self, kind: ResourceKind, item: Stored,
                               uids: set[Any]) -> None:
        await self._write_without(kind, item, "ownerReferences", lambda r: r.get("uid") in uids)

    async def _remove_finalizer(self, kind: ResourceKind, item: Stored, finalizer: str) -> None:
        await self._write_without(kind, item, "finalizers", lambda f: f == finalizer)

    async def _write_without(self, kind: ResourceKind, item: Stored, field: str,
                             unwanted: Callable[[Any], bool]) -> None:
        """Write the object without the entries of metadata.`field` that are `unwanted`; the
        resourceVersion it carries makes a racing write a Conflict, which the queue retries."""
        new = copy_json(item.obj)
        kept = [entry for entry in new["metadata"].get(field) or () if not unwanted(entry)]
        if kept:
            new["metadata"][field] = kept
        else:
            new["metadata"].pop(field, None)
        await self.api.update(kind, item.namespace, item.name, new)

    async def run(self) -> None:
        store = self.api.store
        store.listen(self._observe)
        try:
            # what the informers' initial lists deliver: all objects as they are now
            for key in store.keys():
                for stored in store.list(key):
                    self._observe(Event(ADDED, key, stored.rv, stored, None))
            await run_together(self.attempt_to_delete.run(), self.attempt_to_orphan.run())
        finally:
            store.unlisten(self._observe)
