"""Thread-safe in-memory copies of the objects the agent watches, fed by the operators' event
handlers and read by the reconcilers (which run on other threads)."""

from __future__ import annotations

import copy
import threading
from typing import Any

Key = tuple[str, str]
"""(namespace, name); namespace is "" for cluster-scoped objects."""


def key_of(obj: dict[str, Any]) -> Key:
    metadata = obj.get("metadata") or {}
    return (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))


def _without_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """A copy without metadata.managedFields: often the bulk of an object, never read here (a
    write that omits them keeps the server's)."""
    kept = copy.deepcopy({k: v for k, v in obj.items() if k != "metadata"})
    metadata = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    kept["metadata"] = copy.deepcopy(metadata)
    return kept


class Mirror:
    """The last seen state of one kind's objects. Readers get copies: never shared mutable."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[Key, dict[str, Any]] = {}
        self._seen: set[Key] | None = None

    def apply(self, event_type: str | None, obj: dict[str, Any]) -> Key:
        """Record a watch event (kopf's type: None for the initial listing); returns the key."""
        key = key_of(obj)
        with self._lock:
            if event_type == "DELETED":
                self._objects.pop(key, None)
            else:
                self._objects[key] = _without_managed_fields(obj)
                if self._seen is not None:
                    self._seen.add(key)
        return key

    def start_relist(self) -> None:
        """A new watch is about to list everything again: remember what it shows."""
        with self._lock:
            self._seen = set()

    def finish_relist(self) -> list[Key]:
        """The new listing is complete: forget (and return) what it did not show — objects
        deleted while no watch was running never get a DELETED event."""
        with self._lock:
            seen, self._seen = self._seen or set(), None
            stale = [key for key in self._objects if key not in seen]
            for key in stale:
                del self._objects[key]
            return stale

    def get(self, key: Key) -> dict[str, Any] | None:
        with self._lock:
            found = self._objects.get(key)
            return copy.deepcopy(found) if found is not None else None

    def values(self) -> list[dict[str, Any]]:
        with self._lock:
            return [copy.deepcopy(obj) for obj in self._objects.values()]

    def keys(self) -> list[Key]:
        with self._lock:
            return list(self._objects)
