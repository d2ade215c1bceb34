"""The home namespaces this agent offloads whose objects it watches, and which of them are
listed: what the offloaded namespaces' watches (`home_agent.watches`) follow, and what decides
whether a namespace's keys can be decided on."""

from __future__ import annotations

from collections.abc import Callable


class OffloadedNamespaces:
    """The home namespaces whose objects this agent watches (those it offloads), and which of
    them are listed. Subscribers hear of each namespace followed or forgotten (`subscribe`) and
    of each one listed (`on_listed`): what was decided while it was not yet listed is looked at
    again then."""

    def __init__(self) -> None:
        self._watched: set[str] = set()
        self._listed: set[str] = set()
        self._subscribers: list[Callable[[], None]] = []
        self._listeners: list[Callable[[str], None]] = []

    def subscribe(self, changed: Callable[[], None]) -> None:
        """`changed()` after each change of the namespaces watched."""
        self._subscribers.append(changed)

    def on_listed(self, listed: Callable[[str], None]) -> None:
        """`listed(namespace)` once a namespace watched is listed."""
        self._listeners.append(listed)

    def _changed(self) -> None:
        for changed in self._subscribers:
            changed()

    def follow(self, namespace: str) -> None:
        self._watched.add(namespace)
        self._changed()

    def listed(self, namespace: str) -> None:
        if namespace in self._watched and namespace not in self._listed:
            self._listed.add(namespace)
            for listener in self._listeners:
                listener(namespace)

    def forget(self, namespace: str) -> None:
        self._watched.discard(namespace)
        self._listed.discard(namespace)
        self._changed()

    def watched(self, namespace: str) -> bool:
        return namespace in self._watched

    def is_listed(self, namespace: str) -> bool:
        return namespace in self._listed

    def namespaces(self) -> frozenset[str]:
        return frozenset(self._watched)

