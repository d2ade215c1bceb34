"""Converges the virtual Node (and the VirtualNode's status) on what `shared.forge.node` and
`shared.forge.virtual_node` compute."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from annex.api_errors import status_of
from annex.api_paths import core_path, custom_path
from annex.kubeapi import STRATEGIC_MERGE_PATCH
from home_agent.agent import Agent
from shared.api.virtual_node import VIRTUAL_NODE
from shared.forge.node import (
    desired_node,
    new_node,
    node_metadata_patch,
    node_status_patch,
    status_as_known,
)
from shared.forge.virtual_node import virtual_node_status

log = logging.getLogger(__name__)


async def reconcile_node(agent: Agent) -> None:
    virtual_node = agent.virtual_node()
    if virtual_node is not None and not virtual_node.spec.create_node:
        return
    health = agent.health  # one reading: the checks run concurrently
    config = agent.config
    desired = desired_node(agent.node_name(), config.remote_cluster_id, agent.offer(),
                           virtual_node, health, config.agent_ip, config.kubelet_port)
    name = desired.name
    now = datetime.now(UTC)
    current = agent.mirrors.nodes.get(("", name))
    offer_known = agent.tenant_synced.is_set()
    if current is None and virtual_node is not None and (
            virtual_node.metadata.deletion_timestamp is not None):
        return  # drained by the home controller, which deletes the node: not made again
    if current is None and not offer_known:
        agent.queue.add_after(("node",), 1.0)  # a new node waits for the offer
        return
    if current is None:
        first_status = node_status_patch({}, desired.status, now) or desired.status
        try:
            current = await agent.home.create(
                core_path("nodes"), new_node(name, desired.labels, desired.taints, first_status,
                                               desired.annotations))
            log.info("created virtual node %s", name)
        except Exception as error:
            if status_of(error) != 409:
                raise
            current = await agent.home.get(core_path("nodes", name=name))  # adopt it
            log.debug("adopting existing node %s", name)
    assert current is not None
    status = status_as_known(desired.status, current.get("status") or {}, health, offer_known)
    patch = (node_metadata_patch(current, desired.labels, desired.taints, desired.annotations)
             if offer_known else None)
    if patch is not None:
        current = await agent.home.patch(core_path("nodes", name=name), patch)
    assert current is not None
    new_status = node_status_patch(current.get("status") or {}, status, now)
    if new_status is not None:
        log.debug("node %s status: %s", name, new_status["conditions"])
        await agent.home.patch(core_path("nodes", name=name, subresource="status"),
                               {"status": new_status}, STRATEGIC_MERGE_PATCH)
    if virtual_node is not None and health.ready is not None:
        reported = virtual_node_status(virtual_node.status, name, health, now)
        if reported is not None:
            await agent.home.patch(
                custom_path(VIRTUAL_NODE, virtual_node.metadata.namespace or "",
                            virtual_node.metadata.name or "", "status"),
                {"status": reported})
