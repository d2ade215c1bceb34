"""A NamespaceOffloading as one remote cluster's agent carries it out.

`offloading_plan` says what the namespace's label, this consumer's NamespaceMap entry, the
cluster's finalizer and the NamespaceOffloading's status should become; the agent's
`offloading.py` fetches what it takes and writes the plan, each part only when it differs.

Each remote cluster owns one entry of `status.remoteNamespacesConditions` (its Ready condition)
and one finalizer; the phase is computed over every cluster's entry, so the agents of several
remote clusters agree on it without talking to each other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.api.namespace_map import MappingPhase, NamespaceMap
from shared.api.namespace_offloading import NamespaceOffloading, OffloadingPhase
from shared.forge.namespace import remote_namespace_name
from shared.node_selector import selects_a_node
from shared.rfc3339 import rfc3339
from shared.wellknown import OFFLOADING_GROUP

READY = "Ready"
INVALID_NAMESPACE_NAME_REASON = "InvalidNamespaceName"
CLAIMS_RETAINED_REASON = "RemoteClaimsRetained"
PENDING_REASON = "Pending"
FAILED_REASONS = frozenset({MappingPhase.CREATION_LOOP_BACK_OFF.value,
                            INVALID_NAMESPACE_NAME_REASON})
"""Ready reasons that will not resolve by waiting (the phase counts them as failed)."""


def finalizer_name(remote_cluster_id: str) -> str:
    """The finalizer holding a NamespaceOffloading until this cluster's twin namespace is gone."""
    return f"{OFFLOADING_GROUP}/{('remote-' + remote_cluster_id)[:63]}"


def phase_of(conditions_by_cluster: Mapping[str, Sequence[Mapping[str, Any]]],
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


def ready_condition(status: str, reason: str, message: str,
                    previous: list[dict[str, Any]] | None, now: datetime) -> dict[str, Any]:
    """This cluster's Ready condition; it keeps its transition time while its status does."""
    old = next((c for c in previous or [] if c.get("type") == READY), None)
    transition = (old.get("lastTransitionTime") if old is not None
                  and old.get("status") == status else rfc3339(now))
    return {"type": READY, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": transition}


def mapping_condition(namespace_map: NamespaceMap | None, namespace: str,
                      remote_name: str) -> tuple[str, str, str]:
    """Ready's status, reason and message from what the enforcer reports of the twin
    (`status.currentMapping`): Pending until it reports the wanted name."""
    current = namespace_map.status.current_mapping.get(namespace) if namespace_map else None
    if current is None or current.remote_namespace != remote_name:
        return "False", PENDING_REASON, f"waiting for the remote cluster to create {remote_name!r}"
    if current.phase == MappingPhase.ACCEPTED:
        return "True", MappingPhase.ACCEPTED.value, f"namespace extended to {remote_name!r}"
    return "False", current.phase.value, current.message or current.phase.value


def status_patch(offloading: Mapping[str, Any], remote_cluster_id: str,
                 conditions: list[dict[str, Any]] | None, remote_name: str | None,
                 terminating: bool, retained: Sequence[str] = ()) -> dict[str, Any] | None:
    """The status merge patch setting this cluster's conditions (None removes them), the remote
    name (None leaves it), the claims its withdrawal keeps there (`retained`) and the phase over
    all clusters, or None when the status says them."""
    status = dict(offloading.get("status") or {})
    patch: dict[str, Any] = {}
    kept = sorted(retained) or None
    if (status.get("retainedRemoteClaims") or {}).get(remote_cluster_id) != kept:
        patch["retainedRemoteClaims"] = {remote_cluster_id: kept}
    by_cluster = dict(status.get("remoteNamespacesConditions") or {})
    if conditions is None:
        by_cluster.pop(remote_cluster_id, None)
    else:
        by_cluster[remote_cluster_id] = conditions
    if status.get("remoteNamespacesConditions", {}).get(remote_cluster_id) != conditions:
        patch["remoteNamespacesConditions"] = {remote_cluster_id: conditions}
    phase = phase_of(by_cluster, terminating).value
    if status.get("offloadingPhase") != phase:
        patch["offloadingPhase"] = phase
    if remote_name is not None and status.get("remoteNamespaceName") != remote_name:
        patch["remoteNamespaceName"] = remote_name
    if not patch:
        return None
    generation = (offloading.get("metadata") or {}).get("generation")
    if generation is not None:
        patch["observedGeneration"] = generation
    return patch


@dataclass(frozen=True)
class OffloadingPlan:
    """What one remote cluster's share of a namespace's offloading should become."""

    scheduling_enabled: bool
    """SCHEDULING_ENABLED_LABEL on the namespace: while a NamespaceOffloading exists there and
    is not being deleted."""
    remote_namespace: str | None
    """This namespace's entry in the NamespaceMap's `desiredMapping` (None: no entry)."""
    finalizer: bool
    """This cluster's finalizer on the NamespaceOffloading. Added before the twin is asked for,
    removed once it is gone (or was never asked for)."""
    status: dict[str, Any] | None
    """The NamespaceOffloading's status merge patch (None: nothing to write)."""
    invalid_name: str | None = None
    """Why the namespace cannot be offloaded (an InvalidNamespaceName Event), once per reason."""


def offloading_plan(offloading: Mapping[str, Any] | None, namespace: str,
                    namespace_map: NamespaceMap | None, *,
                    nodes: Mapping[str, Mapping[str, str]], home_cluster_id: str,
                    remote_cluster_id: str, now: datetime,
                    withdrawn: bool = False, remote_claims: Sequence[str] = (),
                    delete_remote_claims: bool = False) -> OffloadingPlan:
    """The plan for `namespace`'s NamespaceOffloading (None: there is none) on the virtual nodes
    `nodes`, name → labels (what its clusterSelector is matched against: selecting one of a
    provider's pool nodes selects the provider).

    - no NamespaceOffloading: no label, no entry;
    - being deleted, not selecting this virtual node, or the virtual node `withdrawn` (its
      VirtualNode deleted: the home controller drains it): no entry; while the enforcer still
      reports the twin, Ready is False (Terminating) and the finalizer stays; then the finalizer
      goes, and this cluster's conditions too unless the object goes with it; but while the
      twin holds `remote_claims` (their data) and neither the NamespaceOffloading's
      `spec.deleteRemoteClaims` nor `delete_remote_claims` (its VirtualNode's) asks for their
      deletion, the entry stays, Ready is False (RemoteClaimsRetained) and
      `status.retainedRemoteClaims` names them; the finalizer stays too, but for a `withdrawn`
      virtual node, whose agent goes (the twin and its claims stay with the provider);
    - selected: the finalizer, the entry under the mapping strategy's name and Ready as the
      enforcer reports the twin; a name the strategy refuses is reported (InvalidNamespaceName)
      and leaves the entry as it is.
    """
    current_entry = namespace_map.spec.desired_mapping.get(namespace) if namespace_map else None
    if offloading is None:
        return OffloadingPlan(scheduling_enabled=False, remote_namespace=None, finalizer=False,
                              status=None)
    parsed = NamespaceOffloading.model_validate(offloading)
    spec = parsed.spec
    terminating = parsed.metadata.deletion_timestamp is not None
    previous = parsed.status.remote_namespaces_conditions.get(remote_cluster_id)
    previous_conditions = [c.to_wire() for c in previous] if previous else None

    if terminating or withdrawn or not selects_a_node(spec.cluster_selector, nodes):
        still_mapped = namespace_map is not None and (
            namespace in namespace_map.status.current_mapping)
        if still_mapped and current_entry is not None and remote_claims and not (
                spec.delete_remote_claims or delete_remote_claims):
            names = ", ".join(sorted(remote_claims))
            kept = (f"the virtual node was deleted; the remote namespace {current_entry} stays on "
                    f"the provider with the claims {names} and their data (delete them there, "
                    "or offload the namespace to this provider again to use them)"
                    if withdrawn else
                    f"the remote namespace {current_entry} is kept: it holds the claims {names} "
                    "and their data (set spec.deleteRemoteClaims to delete them, or delete the "
                    "claims)")
            conditions = [ready_condition("False", CLAIMS_RETAINED_REASON, kept,
                                          previous_conditions, now)]
            # A deleted virtual node's agent goes: it holds the NamespaceOffloading no longer
            # (nothing would release it), and leaves the twin and its claims to the provider.
            return OffloadingPlan(
                scheduling_enabled=not terminating, remote_namespace=current_entry,
                finalizer=not withdrawn, status=status_patch(
                    offloading, remote_cluster_id, conditions, None, terminating,
                    remote_claims))
        if still_mapped:
            finalizers = (offloading.get("metadata") or {}).get("finalizers") or []
            conditions = [ready_condition("False", MappingPhase.TERMINATING.value,
                                          "waiting for the remote namespace to be deleted",
                                          previous_conditions, now)]
            return OffloadingPlan(
                scheduling_enabled=not terminating, remote_namespace=None,
                finalizer=finalizer_name(remote_cluster_id) in finalizers,
                status=status_patch(offloading, remote_cluster_id, conditions, None,
                                    terminating))
        return OffloadingPlan(
            scheduling_enabled=not terminating, remote_namespace=None, finalizer=False,
            status=None if terminating else status_patch(offloading, remote_cluster_id, None,
                                                         None, terminating=False))

    try:
        remote_name = remote_namespace_name(namespace, spec.namespace_mapping_strategy,
                                            home_cluster_id, spec.remote_namespace_name)
    except ValueError as error:
        reason = str(error)
        conditions = [ready_condition("False", INVALID_NAMESPACE_NAME_REASON, reason,
                                      previous_conditions, now)]
        reported = any(c.get("message") == reason for c in previous_conditions or [])
        return OffloadingPlan(
            scheduling_enabled=True, remote_namespace=current_entry, finalizer=True,
            status=status_patch(offloading, remote_cluster_id, conditions, None,
                                terminating=False),
            invalid_name=None if reported else reason)
    status, reason, message = mapping_condition(namespace_map, namespace, remote_name)
    conditions = [ready_condition(status, reason, message, previous_conditions, now)]
    return OffloadingPlan(
        scheduling_enabled=True, remote_namespace=remote_name, finalizer=True,
        status=status_patch(offloading, remote_cluster_id, conditions, remote_name,
                            terminating=False))
