"""The Event reflector's copies at home (`home_agent.reflection.event`), as it knows them
without watching them: listed once a namespace, then as its writes' answers left them."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from annex.mirror import Key, discard


class Copies:
    """Our copies at home, each as its `home_copy_summary`, kept as one string of its uid,
    resourceVersion and digest (all a write over the copy or its deletion needs): there are as
    many as remote Events (200,000 at N = 50,000), a Mirror's encoding and compression of each
    cost a restart more than listing them. Never anyone else's copy. Thread-safe: `resync`
    reads the keys from another thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._copies: dict[str, dict[str, str]] = {}
        """Namespace → name → "uid resourceVersion digest"."""

    def set(self, key: Key, summary: Mapping[str, Any] | None) -> None:
        """`summary` (None: there is no copy at `key`)."""
        with self._lock:
            if summary is None:
                discard(self._copies, key)
                return
            metadata = summary["metadata"]
            self._copies.setdefault(key[0], {})[key[1]] = (
                f"{metadata.get('uid') or ''} {metadata.get('resourceVersion') or ''} "
                f"{summary['digest']}")

    def get(self, key: Key) -> dict[str, Any] | None:
        """The copy's `home_copy_summary`, or None."""
        with self._lock:
            packed = self._copies.get(key[0], {}).get(key[1])
        if packed is None:
            return None
        uid, rest = packed.split(" ", 1)
        version, digest = rest.rsplit(" ", 1)  # a resourceVersion is opaque
        metadata = {"namespace": key[0], "name": key[1], "uid": uid, "resourceVersion": version}
        return {"metadata": {k: v for k, v in metadata.items() if v}, "digest": digest}

    def keys(self) -> list[Key]:
        with self._lock:
            return [(namespace, name) for namespace, names in self._copies.items()
                    for name in names]

    def forget(self, namespace: str) -> None:
        """Nothing known of `namespace`'s copies any more."""
        with self._lock:
            self._copies.pop(namespace, None)

    def size(self) -> int:
        with self._lock:
            return sum(len(names) for names in self._copies.values())
