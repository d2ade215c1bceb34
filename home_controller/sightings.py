"""What the discovery sources see now: per source and service instance, the cluster it
announces. Sources (mdns.py, dns.py) put and drop sightings; every change names the clusters it
touched to `on_change` (the ForeignCluster controller's queue), and the controller reads the
table as it is (level-triggered: a missed change is repaired by the next look)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from shared.api.foreign_cluster import DiscoverySource
from shared.dnssd import Announcement
from shared.forge.foreign_cluster import Sighting


class Sightings:
    def __init__(self, on_change: Callable[[str], None]) -> None:
        self._seen: dict[tuple[DiscoverySource, str], Sighting] = {}
        self._on_change = on_change
        self._looking: set[DiscoverySource] = set()
        self._pending: set[DiscoverySource] = set()
        """Enabled sources that have not finished their first look: until they have, a cluster
        they do not show may only not be seen yet."""

    def expect(self, source: DiscoverySource) -> None:
        """`source` is enabled: its first look is awaited."""
        self._pending.add(source)
        self._looking.add(source)

    def settle(self, source: DiscoverySource) -> None:
        self._pending.discard(source)

    def fail(self, source: DiscoverySource) -> None:
        """`source` cannot look (no multicast, no such interface): what it found before is
        neither here nor gone."""
        self._pending.discard(source)
        self._looking.discard(source)

    def settled(self) -> bool:
        return not self._pending

    def looking(self, source: DiscoverySource) -> bool:
        """Whether the absence of an announcement from `source` means it is gone (a source
        that is off, or failed, says nothing)."""
        return source in self._looking

    def put(self, source: DiscoverySource, instance: str, announcement: Announcement) -> None:
        before = self._seen.get((source, instance))
        if before is not None and before.announcement == announcement:
            return
        since = (before.since if before is not None
                 and before.announcement.cluster_id == announcement.cluster_id
                 else datetime.now(UTC).replace(microsecond=0))
        self._seen[(source, instance)] = Sighting(source, instance, announcement, since)
        if before is not None and before.announcement.cluster_id != announcement.cluster_id:
            self._on_change(before.announcement.cluster_id)
        self._on_change(announcement.cluster_id)

    def drop(self, source: DiscoverySource, instance: str) -> None:
        before = self._seen.pop((source, instance), None)
        if before is not None:
            self._on_change(before.announcement.cluster_id)

    def replace(self, source: DiscoverySource, found: dict[str, Announcement]) -> None:
        """What `source` sees is exactly `found` (instance → announcement) now."""
        for gone in [instance for each, instance in self._seen
                     if each is source and instance not in found]:
            self.drop(source, gone)
        for instance, announcement in found.items():
            self.put(source, instance, announcement)

    def of(self, cluster_id: str) -> list[Sighting]:
        """The cluster's sightings, the longest-standing first."""
        return sorted((s for s in self._seen.values() if s.announcement.cluster_id == cluster_id),
                      key=lambda s: (s.since, s.source.value, s.instance))

    def clusters(self) -> Iterable[str]:
        return {s.announcement.cluster_id for s in self._seen.values()}
