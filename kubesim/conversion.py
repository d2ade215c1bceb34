"""Kinds served in two API groups from one storage, converted on the way in and out.

events.k8s.io/v1 Events are core v1 Events with renamed fields (pkg/apis/events/v1
conversion): an Event written through either API is read through both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubesim.kinds import ResourceKind
from kubesim.store import Filter, Stored

Obj = dict[str, Any]

# events.k8s.io/v1 field -> core v1 field
EVENT_RENAMES = (
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
)


def _renamed(obj: Obj, renames: tuple[tuple[str, str], ...], api_version: str, kind: str) -> Obj:
    mapping = dict(renames)
    result: Obj = {"apiVersion": api_version, "kind": kind}
    for key, value in obj.items():
        if key not in ("apiVersion", "kind"):
            result[mapping.get(key, key)] = value
    return result


@dataclass(frozen=True)
class View:
    """`served` (e.g. events.k8s.io/v1 events) as a view of `storage` (core v1 events)."""

    served: ResourceKind
    storage: ResourceKind
    renames: tuple[tuple[str, str], ...]  # (served field, storage field)

    def inbound(self, body: Any) -> Any:
        """A request body in the served form -> the storage form (others pass unchanged, for
        the decoder to refuse)."""
        if not isinstance(body, dict) or body.get("apiVersion") not in (
            None, self.served.api_version
        ):
            return body
        return _renamed(body, self.renames, self.storage.api_version, self.storage.kind)

    def served_form(self, obj: Obj) -> Obj:
        back = tuple((storage, served) for served, storage in self.renames)
        return _renamed(obj, back, self.served.api_version, self.served.kind)

    def outbound(self, stored: Stored) -> Stored:
        return Stored.of(self.served_form(stored.obj), stored.rv)

    def predicate(self, matches: Filter | None) -> Filter | None:
        if matches is None:
            return None
        return lambda obj: matches(self.served_form(obj))

    def field_selector(self, text: str) -> str:
        """Field selector terms on served fields -> the same terms on storage fields."""
        def term(requirement: str) -> str:
            for served, storage in self.renames:
                if requirement == served or requirement.startswith((served + ".", served + "=",
                                                                    served + "!")):
                    return storage + requirement[len(served):]
            return requirement

        return ",".join(term(t) for t in text.split(",")) if text else text


def views(lookup: Callable[[str, str, str], ResourceKind | None]) -> list[View]:
    served = lookup("events.k8s.io", "v1", "events")
    storage = lookup("", "v1", "events")
    if served is None or storage is None:
        return []
    return [View(served, storage, EVENT_RENAMES)]
