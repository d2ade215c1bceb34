"""NamespaceOffloading → this consumer's NamespaceMap entry → status (DESIGN.md 4).

The agent owns one NamespaceMap (named after the home cluster id) in the remote tenant
namespace and one entry per home namespace it extends to this remote. A finalizer per remote
cluster on the NamespaceOffloading holds its deletion until the enforcer has removed the twin
namespace (its entry leaves `status.currentMapping`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from annex.events import EventRecorder
from annex.kubeapi import core_path, custom_path, is_not_found, status_of
from home_agent.agent import Agent
from home_agent.virtual_node import desired_labels
from shared.api.namespace_map import NAMESPACE_MAP, MappingPhase, NamespaceMap
from shared.api.namespace_offloading import (
    NAMESPACE_OFFLOADING,
    NAMESPACE_OFFLOADING_NAME,
    NamespaceOffloading,
    OffloadingPhase,
)
from shared.forge.namespace import remote_namespace_name
from shared.node_selector import node_selector_matches
from shared.ownership import ownership_labels
from shared.wellknown import HOME_AGENT_COMPONENT, OFFLOADING_GROUP, SCHEDULING_ENABLED_LABEL

log = logging.getLogger(__name__)

READY = "Ready"


def finalizer_name(remote_cluster_id: str) -> str:
    return f"{OFFLOADING_GROUP}/{('remote-' + remote_cluster_id)[:63]}"


def phase_of(conditions_by_cluster: Mapping[str, list[Mapping[str, Any]]],
             terminating: bool) -> OffloadingPhase:
    """The NamespaceOffloading's phase over every remote cluster's Ready condition."""
    if terminating:
        return OffloadingPhase.TERMINATING
    readies = [next((c for c in conditions if c.get("type") == READY), None)
               for conditions in conditions_by_cluster.values()]
    if not readies:
        return OffloadingPhase.NO_CLUSTER_SELECTED
    if all(r is not None and r.get("status") == "True" for r in readies):
        return OffloadingPhase.READY
    failed = [r for r in readies if r is not None and r.get("reason") in FAILED_REASONS]
    if len(failed) == len(readies):
        return OffloadingPhase.ALL_FAILED
    if failed:
        return OffloadingPhase.SOME_FAILED
    return OffloadingPhase.IN_PROGRESS


FAILED_REASONS = frozenset({MappingPhase.CREATION_LOOP_BACK_OFF.value, "InvalidNamespaceName"})


def ready_condition(status: str, reason: str, message: str,
                    previous: list[dict[str, Any]] | None, now: datetime) -> dict[str, Any]:
    old = next((c for c in previous or [] if c.get("type") == READY), None)
    transition = (old.get("lastTransitionTime") if old is not None
                  and old.get("status") == status else now.strftime("%Y-%m-%dT%H:%M:%SZ"))
    return {"type": READY, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": transition}


def _mapping_condition(namespace_map: NamespaceMap | None, namespace: str,
                       remote_name: str) -> tuple[str, str, str]:
    current = namespace_map.status.current_mapping.get(namespace) if namespace_map else None
    if current is None or current.remote_namespace != remote_name:
        return "False", "Pending", f"waiting for the remote cluster to create {remote_name!r}"
    if current.phase == MappingPhase.ACCEPTED:
        return "True", MappingPhase.ACCEPTED.value, f"namespace extended to {remote_name!r}"
    return "False", current.phase.value, current.message or current.phase.value


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


async def _set_mapping(agent: Agent, namespace: str, remote_name: str | None) -> None:
    """Set (or with None remove) this namespace's desiredMapping entry, creating the map."""
    namespace_map = agent.namespace_map()
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


async def _write_status(agent: Agent, obj: Mapping[str, Any],
                        conditions: list[dict[str, Any]] | None, remote_name: str | None,
                        terminating: bool) -> None:
    """Our cluster's conditions (None removes them), the remote name and the phase over all
    clusters; written only when something differs."""
    status = dict(obj.get("status") or {})
    by_cluster = dict(status.get("remoteNamespacesConditions") or {})
    rid = agent.config.remote_cluster_id
    if conditions is None:
        by_cluster.pop(rid, None)
    else:
        by_cluster[rid] = conditions
    patch: dict[str, Any] = {}
    if status.get("remoteNamespacesConditions", {}).get(rid) != conditions:
        patch["remoteNamespacesConditions"] = {rid: conditions}
    phase = phase_of(by_cluster, terminating).value
    if status.get("offloadingPhase") != phase:
        patch["offloadingPhase"] = phase
    if remote_name is not None and status.get("remoteNamespaceName") != remote_name:
        patch["remoteNamespaceName"] = remote_name
    generation = (obj.get("metadata") or {}).get("generation")
    if patch and generation is not None:
        patch["observedGeneration"] = generation
    if patch:
        metadata = obj["metadata"]
        await agent.home.patch(
            custom_path(NAMESPACE_OFFLOADING, metadata["namespace"], metadata["name"], "status"),
            {"status": patch})


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


async def reconcile_offloading(agent: Agent, namespace: str) -> None:
    obj = agent.mirrors.offloadings.get((namespace, NAMESPACE_OFFLOADING_NAME))
    namespace_map = agent.namespace_map()
    await _label_namespace(agent, namespace, offloaded=obj is not None and not (
        (obj.get("metadata") or {}).get("deletionTimestamp")))
    if obj is None:
        await _set_mapping(agent, namespace, None)
        return
    offloading = NamespaceOffloading.model_validate(obj)
    spec = offloading.spec
    selected = node_selector_matches(spec.cluster_selector, desired_labels(agent),
                                     agent.node_name())
    now = datetime.now(UTC)
    previous = (offloading.status.remote_namespaces_conditions or {}).get(
        agent.config.remote_cluster_id)
    previous_dicts: list[dict[str, Any]] | None = (
        [c.to_wire() for c in previous] if previous else None)

    if offloading.metadata.deletion_timestamp is not None or not selected:
        await _set_mapping(agent, namespace, None)
        still_mapped = namespace_map is not None and (
            namespace in namespace_map.status.current_mapping)
        terminating = offloading.metadata.deletion_timestamp is not None
        if still_mapped:
            conditions = [ready_condition("False", MappingPhase.TERMINATING.value,
                                          "waiting for the remote namespace to be deleted",
                                          previous_dicts, now)]
            await _write_status(agent, obj, conditions, None, terminating)
            return
        if terminating:
            await _set_finalizer(agent, obj, present=False)
        else:
            await _write_status(agent, obj, None, None, terminating=False)
            await _set_finalizer(agent, obj, present=False)
        return

    await _set_finalizer(agent, obj, present=True)
    try:
        remote_name = remote_namespace_name(namespace, spec.namespace_mapping_strategy,
                                            agent.config.home_cluster_id,
                                            spec.remote_namespace_name)
    except ValueError as error:
        conditions = [ready_condition("False", "InvalidNamespaceName", str(error),
                                      previous_dicts, now)]
        if not any(c.get("message") == str(error) for c in previous_dicts or []):
            log.warning("namespace %s cannot be offloaded: %s", namespace, error)
            recorder = EventRecorder(agent.home, HOME_AGENT_COMPONENT,
                                     agent.config.home_cluster_id)
            await recorder.record(obj, "InvalidNamespaceName", str(error))
        await _write_status(agent, obj, conditions, None, terminating=False)
        return
    await _set_mapping(agent, namespace, remote_name)
    status, reason, message = _mapping_condition(namespace_map, namespace, remote_name)
    conditions = [ready_condition(status, reason, message, previous_dicts, now)]
    await _write_status(agent, obj, conditions, remote_name, terminating=False)
