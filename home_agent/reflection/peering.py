"""What every reflector reads and writes through, as Liqo's reflectors get their options: both
clusters' clients, this peering's cluster ids (what is ours), the twin namespaces, the
namespaces offloaded here, whether the mirrors are listed, the skip lists and the Event
recorder at home. A reflector gets this and its own mirrors; a kind that needs more gets
exactly that too (`home_agent.assembly` builds them all from the agent)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from annex.events import EventRecorder
from annex.kubeapi import ClusterApi
from annex.mirror import Key
from home_agent.offloaded_namespaces import OffloadedNamespaces
from home_agent.twins import TwinNamespaces
from shared.forge.metadata import ReflectionConfig
from shared.ownership import is_owned


@dataclass(frozen=True)
class Peering:
    home: ClusterApi
    remote: ClusterApi
    home_cluster_id: str
    remote_cluster_id: str
    twins: TwinNamespaces
    offloaded: OffloadedNamespaces
    """The home namespaces offloaded here whose objects are watched."""
    synced: Callable[[], bool]
    """Both sides listed: nothing is decided on a half-filled mirror (a reflection key is
    parked until then)."""
    namespace_ready: Callable[[str], bool]
    """A home namespace's objects are listed (or it is not offloaded here: then nothing is
    reflected there): its keys are parked until then, and released together."""
    reflection_config: Callable[[], ReflectionConfig]
    """The skip lists as they are now (the flags merged with the VirtualNode's)."""
    events: EventRecorder
    """The agent's one recorder at home."""

    def owns(self, obj: Mapping[str, Any]) -> bool:
        """`obj` was made by this peering (its origin and destination labels)."""
        return is_owned(obj, self.home_cluster_id, self.remote_cluster_id)

    def key_ready(self, key: Key) -> bool:
        """A home key's readiness: its namespace's (`namespace_ready`)."""
        return self.namespace_ready(key[0])
