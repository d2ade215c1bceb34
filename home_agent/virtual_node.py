"""Converges the virtual Node (and the VirtualNode's status) on what `node.py` computes."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from annex.kubeapi import STRATEGIC_MERGE_PATCH, core_path, custom_path, status_of
from home_agent.agent import Agent
from shared.api.virtual_node import READY_CONDITION, VIRTUAL_NODE
from shared.forge.node import (
    Health,
    new_node,
    node_labels,
    node_metadata_patch,
    node_status,
    node_status_patch,
    node_taints,
)

log = logging.getLogger(__name__)


def desired_labels(agent: Agent) -> dict[str, str]:
    """The virtual node's labels as they should be (what clusterSelectors are matched against)."""
    virtual_node = agent.virtual_node()
    offer = agent.offer()
    return node_labels(agent.node_name(), agent.config.remote_cluster_id,
                       offer.spec.labels if offer else {},
                       virtual_node.spec.labels if virtual_node else {}, _platform(agent))


def _platform(agent: Agent) -> dict[str, str]:
    """What the offer says about the remote nodes (the consumer may not read them itself)."""
    offer = agent.offer()
    if offer is None:
        return {}
    return {key: value for key, value in (("architecture", offer.spec.architecture),
                                          ("kubeletVersion", offer.spec.kubelet_version))
            if value}


Desired = tuple[str, dict[str, str], list[dict[str, Any]], dict[str, Any]]
"""Node name, labels, taints, status."""


def _desired(agent: Agent, health: Health) -> Desired:
    virtual_node = agent.virtual_node()
    offer = agent.offer()
    name = agent.node_name()
    extra_taints = ([t.to_wire() for t in virtual_node.spec.taints] if virtual_node else [])
    capacity: dict[str, str] = {}
    if virtual_node is not None and virtual_node.spec.resources is not None:
        capacity = dict(virtual_node.spec.resources)
    elif offer is not None:
        capacity = dict(offer.spec.resources)
    labels = desired_labels(agent)
    status = node_status(capacity, health, agent.config.remote_cluster_id,
                         agent.config.agent_ip, name, agent.config.kubelet_port, _platform(agent))
    return name, labels, node_taints(extra_taints), status


async def reconcile_node(agent: Agent) -> None:
    virtual_node = agent.virtual_node()
    if virtual_node is not None and not virtual_node.spec.create_node:
        return
    health = agent.health  # one reading: the checks run concurrently
    name, labels, taints, status = _desired(agent, health)
    now = datetime.now(UTC)
    current = agent.mirrors.nodes.get(("", name))
    offer_known = agent.tenant_synced.is_set()
    if current is None and not offer_known:
        agent.queue.add_after(("node",), 1.0)  # a new node waits for the offer
        return
    if current is None:
        first_status = node_status_patch({}, status, now) or status
        try:
            current = await agent.home.create(core_path("nodes"),
                                              new_node(name, labels, taints, first_status))
            log.info("created virtual node %s", name)
        except Exception as error:
            if status_of(error) != 409:
                raise
            current = await agent.home.get(core_path("nodes", name=name))  # adopt it
            log.debug("adopting existing node %s", name)
    assert current is not None
    if health.ready is None:
        # Not checked yet (e.g. just restarted): keep what the node says rather than writing
        # Unknown for an unchanged remote.
        status = _keep_ready(status, current)
    if not offer_known:
        # The remote side is not listed yet (e.g. unreachable since a restart): keep what the
        # node says about the offer; only readiness is ours to tell.
        current_status = current.get("status") or {}
        status = {**status, "capacity": current_status.get("capacity") or {},
                  "allocatable": current_status.get("allocatable") or {},
                  "nodeInfo": current_status.get("nodeInfo") or status["nodeInfo"]}
    patch = node_metadata_patch(current, labels, taints) if offer_known else None
    if patch is not None:
        current = await agent.home.patch(core_path("nodes", name=name), patch)
    assert current is not None
    new_status = node_status_patch(current.get("status") or {}, status, now)
    if new_status is not None:
        log.debug("node %s status: %s", name, new_status["conditions"])
        await agent.home.patch(core_path("nodes", name=name, subresource="status"),
                               {"status": new_status}, STRATEGIC_MERGE_PATCH)
    if virtual_node is not None and health.ready is not None:
        await _report(agent, health, virtual_node.metadata.namespace or "",
                      virtual_node.metadata.name or "", name, virtual_node.status, now)


def _keep_ready(status: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    existing = next((c for c in (node.get("status") or {}).get("conditions") or []
                     if c.get("type") == "Ready"), None)
    if existing is None:
        return status
    conditions = [existing if c["type"] == "Ready" else c for c in status["conditions"]]
    return {**status, "conditions": conditions}


async def _report(agent: Agent, health: Health, namespace: str, name: str, node_name: str,
                  current: Any, now: datetime) -> None:
    """The VirtualNode's status: its node and readiness (written only when they change)."""
    ready = next((c for c in (current.conditions or []) if c.type == READY_CONDITION), None)
    wanted = "Unknown" if health.ready is None else ("True" if health.ready else "False")
    reason = {"True": "RemoteClusterReady", "False": "RemoteClusterUnreachable"}.get(
        wanted, "RemoteClusterNotChecked")
    if (current.node_name == node_name and ready is not None
            and ready.status == wanted and ready.reason == reason):
        return
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {"type": READY_CONDITION, "status": wanted, "reason": reason,
                 "message": health.message or reason, "lastTransitionTime": stamp}
    await agent.home.patch(
        custom_path(VIRTUAL_NODE, namespace, name, "status"),
        {"status": {"nodeName": node_name, "conditions": [condition],
                    "lastHealthCheck": stamp}},
    )
