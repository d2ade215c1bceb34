"""The informer registry: where each watch event goes, declared rather than hand-wired (after
controller-runtime's `Watches(source, EnqueueRequestsFromMapFunc)` and Liqo's Keyers).

Per watched resource and side ("home", "remote"; any names a component uses) there is exactly
one `Mirror`, the watch that fills it (its name, its label selector) and an ordered list of
routes; a component builds its watches from these declarations (`watched`). `dispatch` applies
an event to the mirror first, so every route reads the mirrors as they are after it, then calls
each route in the order declared:
- a keyer maps the change to the keys it affects, for one queue (a `Controller`, a `KeyQueue`);
- a callback does what is not key mapping (a resync, following a name).
A relist's stale objects (what the new listing no longer shows) go through the same routes as
DELETED events, carrying their last seen state: nobody routes a relist by hand.

Declared before the watches start, then used from the component's event loop only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from annex.mirror import Key, Mirror, key_of


@dataclass(frozen=True)
class Change:
    """One event as its routes see it."""

    event_type: str | None
    obj: dict[str, Any]
    """As the watch sent it; for a relist's DELETED, the last state the mirror kept."""
    key: Key
    before: dict[str, Any] | None = None
    """What the mirror held before the event; only for routes declared `compares=True`
    (reading it costs a decode per event)."""

    @property
    def deleted(self) -> bool:
        return self.event_type == "DELETED"


IN_FLIGHT = ""
"""`Echoes` of a key whose write awaits its answer (no resourceVersion is empty)."""


def _version(obj: Any) -> str | None:
    return (obj.get("metadata") or {}).get("resourceVersion") if isinstance(obj, dict) else None


class Echoes:
    """The watch echoes of a component's own writes, recognised so that they queue nothing:
    the reconcile that wrote decided on what its echo shows. A write of a key (`writing`) is in
    flight until its answer (`answered`), whose resourceVersion is kept until the key's next
    event: that event is the echo when it shows that version. An event while the write is in
    flight (the echo overtaking the answer, or another change) is looked at, and the reconcile
    it queues may find its object `settled`."""

    def __init__(self) -> None:
        self._versions: dict[Hashable, str] = {}

    @contextlib.contextmanager
    def writing(self, key: Hashable) -> Iterator[None]:
        """Around the writes of `key` a reconcile makes."""
        self._versions[key] = IN_FLIGHT
        try:
            yield
        finally:
            if self._versions.get(key) == IN_FLIGHT:
                del self._versions[key]  # nothing answered: no echo to expect

    def answered(self, key: Hashable, answer: Any) -> None:
        """The server's answer to a write of `key` (its object, or anything else)."""
        version = _version(answer)
        if version and self._versions.get(key) == IN_FLIGHT:
            self._versions[key] = str(version)

    def echo(self, key: Hashable, change: Change) -> bool:
        """Whether `change` is the echo of our last write of `key` (which it then forgets)."""
        written = self._versions.get(key)
        if written == IN_FLIGHT:
            return False
        self._versions.pop(key, None)
        return bool(written) and not change.deleted and _version(change.obj) == written

    def settled(self, key: Hashable, current: dict[str, Any] | None) -> bool:
        """Whether `current` is what our last write of `key` made (which it then forgets)."""
        written = self._versions.pop(key, None)
        return bool(written) and _version(current) == written

    def forget(self, key: Hashable | None = None) -> None:
        """A write of `key` (None: of every key) is no longer known to be wanted."""
        if key is None:
            self._versions.clear()
        else:
            self._versions.pop(key, None)


class Queue(Protocol):
    def add(self, key: Any, priority: int = 0) -> None: ...


Resource = tuple[str, str, str]
"""(group, version, plural); group "" for the core API."""

Keyer = Callable[[Change], Iterable[Hashable]]
Callback = Callable[[Change], None]
Keep = Callable[[dict[str, Any]], dict[str, Any] | None]
"""What the mirror keeps of an object (a summary, trimmed metadata); None: nothing (the object
is dropped from the mirror, and the routes still see the event)."""


def _whole(obj: dict[str, Any]) -> dict[str, Any]:
    return obj


@dataclass
class Informer:
    mirror: Mirror = field(default_factory=Mirror)
    keep: Keep = _whole
    routes: list[Callback] = field(default_factory=list)
    compares: bool = False
    """Whether a route reads `Change.before`."""
    resource: Resource | None = None
    """Declared with `Informers.watch` (a mirror asked for by a reader only is not)."""
    answers: dict[Key, tuple[frozenset[str | None], dict[str, Any]]] = field(
        default_factory=dict)
    """Key → (the versions our writes replaced, the last one's answer) for `Informers.latest`,
    until the watch shows another version (thousands of answers are not kept for ever)."""
    by: str = ""
    """The watch that fills the mirror (a component may run several, each its own scope)."""
    label_selector: str = ""


class Informers:
    def __init__(self) -> None:
        self._informers: dict[tuple[str, str], Informer] = {}

    def _informer(self, side: str, resource: str) -> Informer:
        return self._informers.setdefault((side, resource), Informer())

    # --- declaring --------------------------------------------------------------------------

    def mirror(self, side: str, resource: str) -> Mirror:
        """The one mirror of `resource` on `side` (empty while the resource is not watched)."""
        return self._informer(side, resource).mirror

    def written(self, side: str, resource: str) -> Written:
        """`resource` on `side` as a controller that writes it reads it (`Written`)."""
        return Written(self, side, resource)

    def watch(self, side: str, resource: Resource, keep: Keep | None = None, *, by: str,
              label_selector: str = "") -> Mirror:
        """Declare `resource` watched on `side` by the watch named `by` (narrowed by
        `label_selector`), its mirror keeping `keep(obj)`. Mirrors, keyers and callbacks name
        the resource by its plural."""
        informer = self._informer(side, resource[2])
        informer.resource, informer.by, informer.label_selector = resource, by, label_selector
        if keep is not None:
            informer.keep = keep
        return informer.mirror

    def keys(self, side: str, resource: str, keyer: Keyer, queue: Queue, *,
             compares: bool = False, priority: int = 0) -> None:
        """Route each change of `resource` to `queue`, as the keys `keyer` maps it to, at
        `priority` (`annex.workqueue`)."""
        def enqueue(change: Change) -> None:
            for key in keyer(change):
                queue.add(key, priority)

        self.on(side, resource, enqueue, compares=compares)

    def on(self, side: str, resource: str, callback: Callback, *,
           compares: bool = False) -> None:
        """A route that is not key mapping: `callback(change)`, in declaration order."""
        informer = self._informer(side, resource)
        informer.routes.append(callback)
        informer.compares = informer.compares or compares

    def watched(self, side: str, by: str) -> dict[Resource, str]:
        """What the watch `by` on `side` must list and watch: each resource declared for it, in
        declaration order, with its label selector ("" for everything)."""
        return {informer.resource: informer.label_selector
                for (each, _), informer in self._informers.items()
                if each == side and informer.resource is not None and informer.by == by}

    # --- events -----------------------------------------------------------------------------

    def dispatch(self, side: str, resource: str, event_type: str | None,
                 obj: dict[str, Any]) -> None:
        """A watch event: into the mirror, then through every route. Resources not declared
        watched are ignored."""
        informer = self._informers.get((side, resource))
        if informer is None or informer.resource is None:
            return
        key = key_of(obj)
        before = informer.mirror.get(key) if informer.compares else None
        kept = None if event_type == "DELETED" else informer.keep(obj)
        own = informer.answers.get(key)
        if own is not None and (kept is None or _version(obj) not in own[0]):
            del informer.answers[key]  # the echo, a deletion or anyone else's change
        informer.mirror.apply(event_type if kept is not None else "DELETED",
                              kept if kept is not None else obj)
        self._route(informer, Change(event_type, obj, key, before))

    def answered(self, side: str, resource: str, replaced: str | None, answer: Any) -> None:
        """Our write's `answer`, over the version `replaced` (None: a creation), for `latest`
        to read ahead of its watch echo; no route hears of it before the echo."""
        informer = self._informers.get((side, resource))
        if informer is None or not isinstance(answer, dict):
            return
        kept, key = informer.keep(answer), key_of(answer)
        if kept is None:
            return
        # Over our own last answer, whose echo has not come: the mirror may still hold any
        # version the writes replaced.
        own = informer.answers.get(key)
        chain = own[0] if own is not None and _version(own[1]) == replaced else frozenset()
        replaced_all = chain | {replaced}
        if _version(informer.mirror.get(key)) not in replaced_all:
            # The mirror is past what the write replaced: the echo (or a later change) came
            # before the answer, which `latest` would drop unread. Kept, it would stay until
            # the key's next event or look; a busy agent gets echoes first for thousands of
            # pods whose next look waits behind a long queue.
            informer.answers.pop(key, None)
            return
        informer.answers[key] = (replaced_all, kept)

    def latest(self, side: str, resource: str, key: Key) -> dict[str, Any] | None:
        """The mirror's object, or our last write's answer while the mirror still holds what
        that write (or our writes before it) replaced: a watch echoes a write some milliseconds
        after the answer, and a reconcile meanwhile must write over the answer's version, not a
        replaced one the server refuses (409). Only ever newer than the mirror: what the
        mirror has seen deleted or changed by anyone else since stays so."""
        informer = self._informer(side, resource)
        held = informer.mirror.get(key)
        own = informer.answers.get(key)
        if own is None:
            return held
        replaced, answer = own
        if _version(held) in replaced:
            return answer
        del informer.answers[key]
        return held

    @staticmethod
    def _route(informer: Informer, change: Change) -> None:
        for route in informer.routes:
            route(change)

    def start_relist(self, side: str, resources: Iterable[str]) -> None:
        """New watches of `resources` are about to list everything again."""
        for resource in resources:
            self.mirror(side, resource).start_relist()

    def finish_relist(self, side: str, resources: Iterable[str]) -> None:
        """The new listings are complete: what they did not show is routed as DELETED."""
        for resource in resources:
            informer = self._informer(side, resource)
            for key, last in informer.mirror.end_relist().items():
                self._route(informer, Change("DELETED", last, key, last))


class Written:
    """One resource of one side of the registry as the controller that writes it reads it:
    its objects as `Informers.latest` reads them, our writes' answers told (`answered`). What a
    controller gets instead of the whole registry."""

    def __init__(self, informers: Informers, side: str, resource: str) -> None:
        self._informers, self._side, self._resource = informers, side, resource

    def latest(self, key: Key) -> dict[str, Any] | None:
        return self._informers.latest(self._side, self._resource, key)

    def answered(self, replaced: str | None, answer: Any) -> None:
        self._informers.answered(self._side, self._resource, replaced, answer)
