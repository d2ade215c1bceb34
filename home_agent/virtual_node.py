"""Converges the virtual Nodes (and the VirtualNode's status) on what `shared.forge.node` and
`shared.forge.virtual_node` compute: one Node, or one per pool of the offer; a Node the offer
no longer makes is cordoned, and deleted once no pod is bound to it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from annex.api_errors import status_of
from annex.api_paths import core_path, custom_path
from annex.events import EventRecorder
from annex.kubeapi import STRATEGIC_MERGE_PATCH, ClusterApi
from annex.mirror import Mirror
from annex.writes import delete_owned
from shared.api.resource_offer import ResourceOffer
from shared.api.virtual_node import VIRTUAL_NODE, VirtualNode
from shared.forge.node import (
    POOL_WITHDRAWN_REASON,
    agent_nodes,
    desired_node,
    labels_by_name,
    new_node,
    node_metadata_patch,
    served_nodes,
    withdrawal_patch,
    withdrawn_message,
)
from shared.forge.node_status import Health, node_status_patch, status_as_known
from shared.forge.virtual_node import virtual_node_status

log = logging.getLogger(__name__)


WITHDRAWN_RECHECK_SECONDS = 5.0
"""How often a withdrawn pool's node looks again whether pods are still bound to it."""


@dataclass(frozen=True)
class NodeSources:
    """What the virtual nodes are converged from and written with: the home client, Nodes' and
    bound pods' mirrors, the VirtualNode, the node's name, the provider's offer (known once the
    tenant namespace is listed) and the remote's health as they are now, a retry of the node's
    key, where Events go, each node's kubelet API port, and the nodes' fixed settings."""

    home: ClusterApi
    nodes: Mirror
    pods: Mirror
    """The home pods bound to the agent's nodes."""
    virtual_node: Callable[[], VirtualNode | None]
    node_name: Callable[[], str]
    offer: Callable[[], ResourceOffer | None]
    offer_known: Callable[[], bool]
    health: Callable[[], Health]
    retry_after: Callable[[float], None]
    events: EventRecorder
    remote_cluster_id: str
    agent_ip: str
    kubelet_ports: Callable[[Collection[str]], Mapping[str, int]]
    """Each node's kubelet API port, its listener opened when it has none (one per node: the
    API server tells the agent's nodes apart by port alone)."""


async def reconcile_node(sources: NodeSources) -> None:
    virtual_node = sources.virtual_node()
    if virtual_node is not None and not virtual_node.spec.create_node:
        return
    health = sources.health()  # one reading: the checks run concurrently
    existing = agent_nodes(sources.node_name(), sources.remote_cluster_id,
                           labels_by_name(sources.nodes.values()))
    offered, withdrawn = served_nodes(sources.node_name(), sources.offer(), existing)
    ports = sources.kubelet_ports([*offered, *withdrawn])
    for name, pool in offered.items():
        await _converge(sources, virtual_node, health, name, pool, ports[name], None)
    for name, pool in withdrawn.items():
        message = withdrawn_message(name, pool, sources.remote_cluster_id)
        node = await _converge(sources, virtual_node, health, name, pool, ports[name], message)
        if node is not None and not await _delete_unused(sources, node):
            sources.retry_after(WITHDRAWN_RECHECK_SECONDS)
    if virtual_node is not None and health.ready is not None:
        reported = virtual_node_status(virtual_node.status, sources.node_name(), health,
                                       datetime.now(UTC))
        if reported is not None:
            await sources.home.patch(
                custom_path(VIRTUAL_NODE, virtual_node.metadata.namespace or "",
                            virtual_node.metadata.name or "", "status"),
                {"status": reported})


async def _converge(sources: NodeSources, virtual_node: VirtualNode | None, health: Health,
                    name: str, pool: str | None, kubelet_port: int,
                    withdrawn: str | None) -> dict[str, Any] | None:
    """The node `name` (of `pool`, its kubelet API at `kubelet_port`) as it should be, cordoned
    saying why when the offer no longer makes it (`withdrawn`); the node as written, None when
    there is none."""
    desired = desired_node(name, sources.remote_cluster_id, sources.offer(), virtual_node,
                           health, sources.agent_ip, kubelet_port, pool)
    now = datetime.now(UTC)
    current = sources.nodes.get(("", name))
    offer_known = sources.offer_known()
    if current is None and (withdrawn is not None or virtual_node is not None and (
            virtual_node.metadata.deletion_timestamp is not None)):
        return None  # withdrawn, or drained by the home controller: gone, not made again
    if current is None and not offer_known:
        sources.retry_after(1.0)  # a new node waits for the offer
        return None
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
    # A withdrawn node keeps what it lent and its labels: only its readiness is ours to tell.
    offered = offer_known and withdrawn is None
    status = status_as_known(desired.status, current.get("status") or {}, health, offered)
    patch = (node_metadata_patch(current, desired.labels, desired.taints, desired.annotations)
             if offered else None)
    if patch is not None:
        current = await sources.home.patch(core_path("nodes", name=name), patch)
    assert current is not None
    cordon = withdrawal_patch(current, withdrawn) if offer_known else None
    if cordon is not None:
        current = await sources.home.patch(core_path("nodes", name=name), cordon)
        assert current is not None
        if withdrawn is not None:
            log.info("%s", withdrawn)
            await sources.events.record(current, POOL_WITHDRAWN_REASON, withdrawn)
        else:
            log.info("virtual node %s offered again: uncordoned", name)
    new_status = node_status_patch(current.get("status") or {}, status, now)
    if new_status is not None:
        log.debug("node %s status: %s", name, new_status["conditions"])
        await sources.home.patch(core_path("nodes", name=name, subresource="status"),
                               {"status": new_status}, STRATEGIC_MERGE_PATCH)
    return current


async def _delete_unused(sources: NodeSources, node: Mapping[str, Any]) -> bool:
    """Delete the withdrawn `node` once no pod is bound to it (a pod bound to a missing Node is
    garbage-collected: never under running pods), as the API server says it, not only the
    mirror; whether it is gone."""
    name = node["metadata"]["name"]
    if any((pod.get("spec") or {}).get("nodeName") == name for pod in sources.pods.values()):
        return False
    bound = await sources.home.request("GET", core_path("pods"), query={
        "fieldSelector": f"spec.nodeName={name}", "limit": "1"})
    if (bound or {}).get("items"):
        return False
    await delete_owned(sources.home, core_path("nodes", name=name),
                       node["metadata"].get("uid"))
    log.info("withdrawn virtual node %s deleted: no pod is bound to it", name)
    return True
