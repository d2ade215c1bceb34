"""What each consumer's ShadowPods use, kept current by the ShadowPod list+watch (`apply` is
one of its routes; `synced` is set once it listed), so that an admission costs no list of the
consumer's ShadowPods (O(1) instead of O(pods)); and what its reflected claims take
(`requests.storage`, `persistentvolumeclaims`), from the claims' list+watch (`apply_claim`;
`claims_synced`).

The webhook reads `usage(consumer)` plus its own reservations for admitted creates not yet
observed; `observed()` tells it when a reservation has turned into a ledger entry.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from shared import quota as quota_rules
from shared.forge import enforcement
from shared.forge.persistentvolumeclaim import claim_usage
from shared.quantity import parse_quantity
from shared.wellknown import ORIGIN_CLUSTER_LABEL

Key = tuple[str, str]


def _add(total: dict[str, Decimal], amounts: dict[str, Decimal], sign: int) -> None:
    for resource, amount in amounts.items():
        total[resource] = total.get(resource, Decimal(0)) + sign * amount


class UsageLedger:
    def __init__(self) -> None:
        self._entries: dict[Key, tuple[str, dict[str, Decimal]]] = {}
        self._claims: dict[Key, tuple[str, dict[str, Decimal]]] = {}
        self._totals: defaultdict[str, dict[str, Decimal]] = defaultdict(dict)
        self.synced = asyncio.Event()
        self.claims_synced = asyncio.Event()
        self.on_change: Callable[[str], None] = lambda consumer: None
        """Called with the consumer whose usage changed."""
        # Called with (consumer, key, uid) for every stored state of a ShadowPod seen.
        self.on_observed: Callable[[str, Key, str], None] = lambda consumer, key, uid: None

    def __len__(self) -> int:
        return len(self._entries)

    def usage(self, consumer: str) -> dict[str, Decimal]:
        return dict(self._totals[consumer])

    def claim(self, key: Key) -> dict[str, Decimal]:
        """What the claim `key` counts now (nothing when it is not counted)."""
        entry = self._claims.get(key)
        return dict(entry[1]) if entry is not None else {}

    def _set(self, entries: dict[Key, tuple[str, dict[str, Decimal]]], key: Key,
             entry: tuple[str, dict[str, Decimal]] | None) -> None:
        """`key` counts `entry` from now on (None: nothing); the consumers whose usage moved
        are told (a status write, which changes nothing counted, tells nobody)."""
        previous = entries.get(key)
        if previous == entry:
            return
        if previous is not None:
            del entries[key]
            _add(self._totals[previous[0]], previous[1], -1)
        if entry is not None:
            entries[key] = entry
            _add(self._totals[entry[0]], entry[1], +1)
        for consumer in {entry[0] for entry in (previous, entry) if entry is not None}:
            self.on_change(consumer)

    def apply_claim(self, event_type: str, claim: dict[str, Any]) -> None:
        """A reflected claim (its origin label names the consumer) counts until it is being
        deleted."""
        meta = claim.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        consumer = (meta.get("labels") or {}).get(ORIGIN_CLUSTER_LABEL)
        entry = None
        if event_type != "DELETED" and consumer and not meta.get("deletionTimestamp"):
            try:
                entry = (consumer, {name: parse_quantity(value)
                                    for name, value in claim_usage(claim).items()})
            except ValueError:
                entry = None
        self._set(self._claims, key, entry)

    def apply(self, event_type: str, shadowpod: dict[str, Any]) -> None:
        meta = shadowpod.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        consumer = (meta.get("labels") or {}).get(ORIGIN_CLUSTER_LABEL)
        if consumer and event_type != "DELETED":
            self.on_observed(consumer, key, str(meta.get("uid", "")))
        entry = None
        if event_type != "DELETED" and consumer and not enforcement.is_terminal(shadowpod):
            try:
                entry = (consumer, quota_rules.pod_requests(
                    (shadowpod.get("spec") or {}).get("pod") or {}))
            except ValueError:
                entry = None
        self._set(self._entries, key, entry)
