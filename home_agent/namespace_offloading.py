"""NamespaceOffloading → this consumer's NamespaceMap entry → status.

The agent owns one NamespaceMap (named after the home cluster id) in the remote tenant
namespace and one entry per home namespace it extends to this remote. A finalizer per remote
cluster on the NamespaceOffloading holds its deletion until the enforcer has removed the twin
namespace (its entry leaves `status.currentMapping`); while the twin holds claims and nobody
asked for their deletion, the withdrawal waits (`shared.forge.namespace_offloading`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from annex.api_errors import is_not_found
from annex.api_paths import core_path, custom_path
from home_agent.agent import REMOTE, Agent
from home_agent.namespace_map import ensure_namespace_map
from shared.api.builtin import PERSISTENTVOLUMECLAIMS
from shared.api.namespace_map import NAMESPACE_MAP
from shared.api.namespace_offloading import NAMESPACE_OFFLOADING, NAMESPACE_OFFLOADING_NAME
from shared.forge.namespace_offloading import (
    INVALID_NAMESPACE_NAME_REASON,
    finalizer_name,
    offloading_plan,
)
from shared.forge.node import virtual_node_labels
from shared.wellknown import SCHEDULING_ENABLED_LABEL

log = logging.getLogger(__name__)


async def _set_mapping(agent: Agent, namespace: str, remote_name: str | None) -> None:
    """Set (or with None remove) this namespace's desiredMapping entry, creating the map."""
    namespace_map = agent.twins.namespace_map()
    current = namespace_map.spec.desired_mapping.get(namespace) if namespace_map else None
    if current == remote_name:
        return
    if namespace_map is None:
        if remote_name is None:
            return
        if await ensure_namespace_map(agent, {namespace: remote_name}):
            return
    await agent.remote.patch(
        custom_path(NAMESPACE_MAP, agent.tenant_namespace, agent.namespace_map_name),
        {"spec": {"desiredMapping": {namespace: remote_name}}})


async def _set_finalizer(agent: Agent, obj: Mapping[str, Any], present: bool) -> None:
    metadata = obj.get("metadata") or {}
    finalizers = list(metadata.get("finalizers") or [])
    name = finalizer_name(agent.config.remote_cluster_id)
    if (name in finalizers) == present:
        return
    finalizers = finalizers + [name] if present else [f for f in finalizers if f != name]
    await agent.home.patch(
        custom_path(NAMESPACE_OFFLOADING, metadata["namespace"], metadata["name"]),
        {"metadata": {"finalizers": finalizers, "resourceVersion": metadata["resourceVersion"]}})


async def _label_namespace(agent: Agent, namespace: str, offloaded: bool) -> None:
    """Set or remove SCHEDULING_ENABLED_LABEL (written only when it differs)."""
    path = core_path("namespaces", name=namespace)
    try:
        current = await agent.home.get(path)
    except Exception as error:
        if is_not_found(error):
            return
        raise
    labels = (current.get("metadata") or {}).get("labels") or {}
    if (labels.get(SCHEDULING_ENABLED_LABEL) == "true") == offloaded:
        return
    await agent.home.patch(path, {"metadata": {"labels": {
        SCHEDULING_ENABLED_LABEL: "true" if offloaded else None}}})


def remote_claims(agent: Agent, namespace: str) -> list[str]:
    """The claims the namespace's twin holds on the provider (what its withdrawal would delete
    with the twin)."""
    twin = agent.twins.mapped(namespace)
    if twin is None:
        return []
    claims = agent.informers.mirror(REMOTE, PERSISTENTVOLUMECLAIMS.plural)
    return sorted(name for claim_namespace, name in claims.keys() if claim_namespace == twin)


async def reconcile_offloading(agent: Agent, namespace: str) -> None:
    obj = agent.mirrors.offloadings.get((namespace, NAMESPACE_OFFLOADING_NAME))
    config = agent.config
    virtual_node = agent.virtual_node()
    withdrawn = virtual_node is not None and virtual_node.metadata.deletion_timestamp is not None
    plan = offloading_plan(
        obj, namespace, agent.twins.namespace_map(), node_name=agent.node_name(),
        node_labels=virtual_node_labels(agent.node_name(), config.remote_cluster_id,
                                        agent.offer(), virtual_node),
        home_cluster_id=config.home_cluster_id, remote_cluster_id=config.remote_cluster_id,
        now=datetime.now(UTC), withdrawn=withdrawn, remote_claims=remote_claims(agent, namespace),
        delete_remote_claims=withdrawn and virtual_node is not None
        and virtual_node.spec.delete_remote_claims)
    await _label_namespace(agent, namespace, plan.scheduling_enabled)
    if obj is not None and plan.finalizer:
        await _set_finalizer(agent, obj, present=True)  # before the twin is asked for
    await _set_mapping(agent, namespace, plan.remote_namespace)
    if obj is None:
        return
    if plan.invalid_name is not None:
        log.warning("namespace %s cannot be offloaded: %s", namespace, plan.invalid_name)
        await agent.events.record(obj, INVALID_NAMESPACE_NAME_REASON, plan.invalid_name)
    if plan.status is not None:
        metadata = obj["metadata"]
        obj = await agent.home.patch(  # its new resourceVersion guards the finalizer's removal
            custom_path(NAMESPACE_OFFLOADING, metadata["namespace"], metadata["name"], "status"),
            {"status": plan.status})
    if not plan.finalizer:
        await _set_finalizer(agent, obj, present=False)  # last: the object may go with it
