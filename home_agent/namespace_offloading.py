"""NamespaceOffloading → this consumer's NamespaceMap entry → status.

The agent owns one NamespaceMap (named after the home cluster id) in the remote tenant
namespace and one entry per home namespace it extends to this remote. A finalizer per remote
cluster on the NamespaceOffloading holds its deletion until the enforcer has removed the twin
namespace (its entry leaves `status.currentMapping`); while the twin holds claims and nobody
asked for their deletion, the withdrawal waits (`shared.forge.namespace_offloading`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from annex.api_errors import is_not_found
from annex.api_paths import core_path, custom_path
from annex.events import EventRecorder
from annex.kubeapi import ClusterApi
from annex.mirror import Mirror
from home_agent.namespace_map import ConsumerNamespaceMap, ensure_namespace_map
from home_agent.twins import TwinNamespaces
from shared.api.namespace_offloading import NAMESPACE_OFFLOADING, NAMESPACE_OFFLOADING_NAME
from shared.api.resource_offer import ResourceOffer
from shared.api.virtual_node import VirtualNode
from shared.forge.namespace_offloading import (
    INVALID_NAMESPACE_NAME_REASON,
    finalizer_name,
    offloading_plan,
)
from shared.forge.node import offered_node_labels
from shared.wellknown import SCHEDULING_ENABLED_LABEL

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OffloadingSources:
    """What a namespace's offloading is decided from and written with: the home client, the
    NamespaceOffloadings' mirror, the remote claims' mirror, the twin namespaces, this
    consumer's NamespaceMap, the VirtualNode, the node's name and the provider's offer as they
    are now, the recorder of the agent's Events, and the peering's cluster ids."""

    home: ClusterApi
    offloadings: Mirror
    remote_claims: Mirror
    twins: TwinNamespaces
    namespace_map: ConsumerNamespaceMap
    virtual_node: Callable[[], VirtualNode | None]
    node_name: Callable[[], str]
    offer: Callable[[], ResourceOffer | None]
    events: EventRecorder
    home_cluster_id: str
    remote_cluster_id: str


async def _set_mapping(sources: OffloadingSources, namespace: str, remote_name: str | None) -> None:
    """Set (or with None remove) this namespace's desiredMapping entry, creating the map."""
    namespace_map = sources.twins.namespace_map()
    current = namespace_map.spec.desired_mapping.get(namespace) if namespace_map else None
    if current == remote_name:
        return
    if namespace_map is None:
        if remote_name is None:
            return
        if await ensure_namespace_map(sources.namespace_map, {namespace: remote_name}):
            return
    await sources.namespace_map.remote.patch(
        sources.namespace_map.path, {"spec": {"desiredMapping": {namespace: remote_name}}})


async def _set_finalizer(sources: OffloadingSources, obj: Mapping[str, Any], present: bool) -> None:
    metadata = obj.get("metadata") or {}
    finalizers = list(metadata.get("finalizers") or [])
    name = finalizer_name(sources.remote_cluster_id)
    if (name in finalizers) == present:
        return
    finalizers = finalizers + [name] if present else [f for f in finalizers if f != name]
    await sources.home.patch(
        custom_path(NAMESPACE_OFFLOADING, metadata["namespace"], metadata["name"]),
        {"metadata": {"finalizers": finalizers, "resourceVersion": metadata["resourceVersion"]}})


async def _label_namespace(sources: OffloadingSources, namespace: str, offloaded: bool) -> None:
    """Set or remove SCHEDULING_ENABLED_LABEL (written only when it differs)."""
    path = core_path("namespaces", name=namespace)
    try:
        current = await sources.home.get(path)
    except Exception as error:
        if is_not_found(error):
            return
        raise
    labels = (current.get("metadata") or {}).get("labels") or {}
    if (labels.get(SCHEDULING_ENABLED_LABEL) == "true") == offloaded:
        return
    await sources.home.patch(path, {"metadata": {"labels": {
        SCHEDULING_ENABLED_LABEL: "true" if offloaded else None}}})


def remote_claims(sources: OffloadingSources, namespace: str) -> list[str]:
    """The claims the namespace's twin holds on the provider (what its withdrawal would delete
    with the twin)."""
    twin = sources.twins.mapped(namespace)
    if twin is None:
        return []
    return sorted(name for claim_namespace, name in sources.remote_claims.keys()
                  if claim_namespace == twin)


async def reconcile_offloading(sources: OffloadingSources, namespace: str) -> None:
    obj = sources.offloadings.get((namespace, NAMESPACE_OFFLOADING_NAME))
    virtual_node = sources.virtual_node()
    withdrawn = virtual_node is not None and virtual_node.metadata.deletion_timestamp is not None
    plan = offloading_plan(
        obj, namespace, sources.twins.namespace_map(),
        nodes=offered_node_labels(sources.node_name(), sources.remote_cluster_id,
                                  sources.offer(), virtual_node),
        home_cluster_id=sources.home_cluster_id, remote_cluster_id=sources.remote_cluster_id,
        now=datetime.now(UTC), withdrawn=withdrawn, remote_claims=remote_claims(sources, namespace),
        delete_remote_claims=withdrawn and virtual_node is not None
        and virtual_node.spec.delete_remote_claims)
    await _label_namespace(sources, namespace, plan.scheduling_enabled)
    if obj is not None and plan.finalizer:
        await _set_finalizer(sources, obj, present=True)  # before the twin is asked for
    await _set_mapping(sources, namespace, plan.remote_namespace)
    if obj is None:
        return
    if plan.invalid_name is not None:
        log.warning("namespace %s cannot be offloaded: %s", namespace, plan.invalid_name)
        await sources.events.record(obj, INVALID_NAMESPACE_NAME_REASON, plan.invalid_name)
    if plan.status is not None:
        metadata = obj["metadata"]
        obj = await sources.home.patch(  # its new resourceVersion guards the finalizer's removal
            custom_path(NAMESPACE_OFFLOADING, metadata["namespace"], metadata["name"], "status"),
            {"status": plan.status})
    if not plan.finalizer:
        await _set_finalizer(sources, obj, present=False)  # last: the object may go with it
