"""This consumer's NamespaceMap in the remote tenant namespace: made by the remote watches before
they start, or with the first mapping asked for; `namespace_offloading` keeps its entries."""

from __future__ import annotations

from dataclasses import dataclass

from annex.api_errors import status_of
from annex.api_paths import custom_path
from annex.kubeapi import ClusterApi
from shared.api.namespace_map import NAMESPACE_MAP, NamespaceMap
from shared.ownership import ownership_labels


@dataclass(frozen=True)
class ConsumerNamespaceMap:
    """Where this consumer's NamespaceMap is: the remote client, the tenant namespace, the
    map's name (the home cluster's id: one per consumer) and the peering's cluster ids (its
    ownership labels)."""

    remote: ClusterApi
    namespace: str
    name: str
    home_cluster_id: str
    remote_cluster_id: str

    @property
    def path(self) -> str:
        return custom_path(NAMESPACE_MAP, self.namespace, self.name)


async def ensure_namespace_map(target: ConsumerNamespaceMap,
                               mapping: dict[str, str] | None = None) -> bool:
    """Create this consumer's NamespaceMap (True) unless it exists (False). Read first: a
    restarted agent finds it, and a create refused with 409 would still be a write."""
    if await target.remote.find(target.path) is not None:
        return False
    body = NamespaceMap(metadata={
        "name": target.name, "namespace": target.namespace,
        "labels": ownership_labels(target.home_cluster_id, target.remote_cluster_id)})
    body.spec.desired_mapping = dict(mapping or {})
    try:
        await target.remote.create(custom_path(NAMESPACE_MAP, target.namespace), body.to_wire())
    except Exception as error:
        if status_of(error) != 409:
            raise
        return False
    return True
