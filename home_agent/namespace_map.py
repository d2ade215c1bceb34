"""This consumer's NamespaceMap in the remote tenant namespace: made by the remote watches before
they start, or with the first mapping asked for; `namespace_offloading` keeps its entries."""

from __future__ import annotations

from annex.api_errors import status_of
from annex.api_paths import custom_path
from home_agent.agent import Agent
from shared.api.namespace_map import NAMESPACE_MAP, NamespaceMap
from shared.ownership import ownership_labels


async def ensure_namespace_map(agent: Agent, mapping: dict[str, str] | None = None) -> bool:
    """Create this consumer's NamespaceMap (True) unless it exists (False). Read first: a
    restarted agent finds it, and a create refused with 409 would still be a write."""
    path = custom_path(NAMESPACE_MAP, agent.tenant_namespace)
    if await agent.remote.find(custom_path(NAMESPACE_MAP, agent.tenant_namespace,
                                           agent.namespace_map_name)) is not None:
        return False
    body = NamespaceMap(metadata={
        "name": agent.namespace_map_name, "namespace": agent.tenant_namespace,
        "labels": ownership_labels(agent.config.home_cluster_id, agent.config.remote_cluster_id)})
    body.spec.desired_mapping = dict(mapping or {})
    try:
        await agent.remote.create(path, body.to_wire())
    except Exception as error:
        if status_of(error) != 409:
            raise
        return False
    return True
