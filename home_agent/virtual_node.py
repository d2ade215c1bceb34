"""Converges the virtual Node (and the VirtualNode's status) on what `shared.forge.node` and
`shared.forge.virtual_node` compute."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from annex.api_errors import status_of
from annex.api_paths import core_path, custom_path
from annex.kubeapi import STRATEGIC_MERGE_PATCH, ClusterApi
from annex.mirror import Mirror
from shared.api.resource_offer import ResourceOffer
from shared.api.virtual_node import VIRTUAL_NODE, VirtualNode
from shared.forge.node import (
    Health,
    desired_node,
    new_node,
    node_metadata_patch,
    node_status_patch,
    status_as_known,
)
from shared.forge.virtual_node import virtual_node_status

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NodeSources:
    """What the virtual node is converged from and written with: the home client and Nodes'
    mirror, the VirtualNode, the node's name, the provider's offer (known once the tenant
    namespace is listed) and the remote's health as they are now, a retry of the node's key,
    and the node's fixed settings."""

    home: ClusterApi
    nodes: Mirror
    virtual_node: Callable[[], VirtualNode | None]
    node_name: Callable[[], str]
    offer: Callable[[], ResourceOffer | None]
    offer_known: Callable[[], bool]
    health: Callable[[], Health]
    retry_after: Callable[[float], None]
    remote_cluster_id: str
    agent_ip: str
    kubelet_port: int


async def reconcile_node(sources: NodeSources) -> None:
    virtual_node = sources.virtual_node()
    if virtual_node is not None and not virtual_node.spec.create_node:
        return
    health = sources.health()  # one reading: the checks run concurrently
    desired = desired_node(sources.node_name(), sources.remote_cluster_id, sources.offer(),
                           virtual_node, health, sources.agent_ip, sources.kubelet_port)
    name = desired.name
    now = datetime.now(UTC)
    current = sources.nodes.get(("", name))
    offer_known = sources.offer_known()
    if current is None and virtual_node is not None and (
            virtual_node.metadata.deletion_timestamp is not None):
        return  # drained by the home controller, which deletes the node: not made again
    if current is None and not offer_known:
        sources.retry_after(1.0)  # a new node waits for the offer
        return
    if current is None:
        first_status = node_status_patch({}, desired.status, now) or desired.status
        try:
            current = await sources.home.create(
                core_path("nodes"), new_node(name, desired.labels, desired.taints, first_status,
                                               desired.annotations))
            log.info("created virtual node %s", name)
        except Exception as error:
            if status_of(error) != 409:
                raise
            current = await sources.home.get(core_path("nodes", name=name))  # adopt it
            log.debug("adopting existing node %s", name)
    assert current is not None
    status = status_as_known(desired.status, current.get("status") or {}, health, offer_known)
    patch = (node_metadata_patch(current, desired.labels, desired.taints, desired.annotations)
             if offer_known else None)
    if patch is not None:
        current = await sources.home.patch(core_path("nodes", name=name), patch)
    assert current is not None
    new_status = node_status_patch(current.get("status") or {}, status, now)
    if new_status is not None:
        log.debug("node %s status: %s", name, new_status["conditions"])
        await sources.home.patch(core_path("nodes", name=name, subresource="status"),
                               {"status": new_status}, STRATEGIC_MERGE_PATCH)
    if virtual_node is not None and health.ready is not None:
        reported = virtual_node_status(virtual_node.status, name, health, now)
        if reported is not None:
            await sources.home.patch(
                custom_path(VIRTUAL_NODE, virtual_node.metadata.namespace or "",
                            virtual_node.metadata.name or "", "status"),
                {"status": reported})
