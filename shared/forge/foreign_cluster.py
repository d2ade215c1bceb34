"""The ForeignCluster's rules: what discovery makes of an announcement, how far
peering went (its phase), and the VirtualNode an accepted, consented provider gets.

Discovery never grants anything: the phase only moves past Discovered when the provider's
consumer kubeconfig Secret is at home (its admin ran annexctl peer, or generated a peering token
the consumer redeemed), and only an accepted ForeignCluster becomes a VirtualNode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.api.foreign_cluster import (
    FOREIGN_CLUSTER,
    DiscoverySource,
    ForeignCluster,
    PeeringPhase,
)
from shared.api.virtual_node import VIRTUAL_NODE
from shared.dnssd import Announcement
from shared.offer import is_lendable_extended
from shared.quantity import parse_quantity
from shared.rfc3339 import rfc3339
from shared.wellknown import REMOTE_CLUSTER_ID_LABEL

ACCEPTED_CONDITION = "Accepted"
DISCOVERED_BY_LABEL = "discovery.liqo.io/discovered-by"
"""On a ForeignCluster discovery created: the source (mDNS, DNS). One made by hand has none and
is never deleted by the controller."""
OFFER_SUMMARY_RESOURCES = ("cpu", "memory", "pods")
CORDONED_FOR_EMPTY_OFFER = "discovery.liqo.io/cordoned-for-empty-offer"
"""On a virtual node the home controller cordoned because its provider offers nothing: only
such a cordon is lifted when the offer comes back (a user's cordon stays)."""


@dataclass(frozen=True)
class Sighting:
    """One service instance announcing a cluster, as a discovery source sees it now."""

    source: DiscoverySource
    instance: str
    announcement: Announcement
    since: datetime
    """When this instance first announced this cluster (kept while it goes on announcing it,
    so that a refresh writes nothing)."""


def discovered(sighting: Sighting) -> dict[str, Any]:
    """A new ForeignCluster for a cluster only an announcement told of: phase Discovered (its
    status is written next), not accepted."""
    announcement = sighting.announcement
    return {**FOREIGN_CLUSTER.type_meta(),
            "metadata": {"name": announcement.cluster_id,
                         "labels": {DISCOVERED_BY_LABEL: sighting.source.value}},
            "spec": {"clusterId": announcement.cluster_id,
                     "apiServerUrl": announcement.api_server_url}}


def known(cluster_id: str, api_server_url: str | None, accepted: bool) -> dict[str, Any]:
    """A ForeignCluster for a provider the home cluster knew without discovery (its consumer
    Secret or its VirtualNode came first): made by hand, as far as discovery is concerned."""
    spec: dict[str, Any] = {"clusterId": cluster_id, "accepted": accepted}
    if api_server_url:
        spec["apiServerUrl"] = api_server_url
    return {**FOREIGN_CLUSTER.type_meta(),
            "metadata": {"name": cluster_id}, "spec": spec}


def discovered_spec_patch(foreign: ForeignCluster, sightings: Sequence[Sighting]
                          ) -> dict[str, Any] | None:
    """A discovered ForeignCluster follows its announcement's API address (the provider moved
    it); one made by hand keeps what its author wrote. None: nothing to change."""
    if not sightings or DISCOVERED_BY_LABEL not in (foreign.metadata.labels or {}):
        return None
    url = sightings[0].announcement.api_server_url
    return None if foreign.spec.api_server_url == url else {"spec": {"apiServerUrl": url}}


def discovered_by(foreign: ForeignCluster) -> DiscoverySource | None:
    """The source whose announcement made the ForeignCluster (None: made by hand)."""
    source = (foreign.metadata.labels or {}).get(DISCOVERED_BY_LABEL)
    try:
        return DiscoverySource(source) if source else None
    except ValueError:
        return None


def forgotten(foreign: ForeignCluster, sightings: Sequence[Sighting]) -> bool:
    """Whether the ForeignCluster goes with its announcement: made by discovery, announced no
    more, and nothing happened since (no consent, not accepted, no VirtualNode). A cluster the
    user acted on stays, its discovery marked as no longer announced. Only ask while the
    source that found it is looking: an absence from a source that is off says nothing."""
    return (not sightings and DISCOVERED_BY_LABEL in (foreign.metadata.labels or {})
            and not foreign.spec.accepted
            and foreign.status.phase in (None, PeeringPhase.DISCOVERED))


def phase(credentials: bool, virtual_node: str | None) -> PeeringPhase:
    if virtual_node is not None:
        return PeeringPhase.PEERED
    return PeeringPhase.AUTHENTICATED if credentials else PeeringPhase.DISCOVERED


def offer_summary(resources: Mapping[str, str] | None) -> dict[str, Any] | None:
    """The offer column: "cpu=4 memory=8Gi pods=110", then the devices and huge pages lent
    ("nvidia.com/gpu=2"); "none" when it offers nothing; None while no offer is known."""
    if resources is None:
        return None
    shown = [f"{name}={resources[name]}" for name in OFFER_SUMMARY_RESOURCES
             if name in resources]
    shown += [f"{name}={amount}" for name, amount in sorted(resources.items())
              if is_lendable_extended(name)]
    return {"resources": dict(resources),
            "summary": "none" if offer_is_empty(resources) else " ".join(shown)}


def offer_is_empty(resources: Mapping[str, str]) -> bool:
    """An offer of nothing: no resources, or zero cpu, memory or pods (a pod cannot run)."""
    if not resources:
        return True
    return any(name in resources and _is_zero(resources[name])
               for name in OFFER_SUMMARY_RESOURCES)


def _is_zero(quantity: str) -> bool:
    try:
        return parse_quantity(quantity) <= 0
    except ValueError:
        return False  # not a quantity: the API server would not have taken it


def _discovery(foreign: ForeignCluster, sightings: Sequence[Sighting], looking: bool
               ) -> dict[str, Any] | None:
    known = foreign.status.discovery
    if sightings:
        first = sightings[0]
        since = first.since
        if (known is not None and known.announced and known.announced_since is not None
                and (known.source, known.instance) == (first.source, first.instance)):
            since = min(since, known.announced_since)  # seen before this controller started
        return {"source": first.source.value, "instance": first.instance, "announced": True,
                "announcedSince": rfc3339(since)}
    if known is None:
        source = (foreign.metadata.labels or {}).get(DISCOVERED_BY_LABEL)
        return {"source": DiscoverySource.MANUAL.value} if source is None else None
    if known.source is DiscoverySource.MANUAL or not looking:
        return known.to_wire()
    return {**known.to_wire(), "announced": False}


def _accepted_condition(foreign: ForeignCluster, credentials: bool, virtual_node: str | None,
                        now: datetime, refused: str | None) -> list[dict[str, Any]]:
    if not foreign.spec.accepted:
        return []
    if refused is not None:
        status, reason, message = "False", "VirtualNodeNameTaken", refused
    elif virtual_node is not None:
        status, reason, message = ("True", "VirtualNodeCreated",
                                   f"VirtualNode {virtual_node} serves the cluster")
    elif credentials:
        status, reason, message = ("False", "CreatingVirtualNode",
                                   "the provider consented: creating the VirtualNode")
    else:
        status, reason, message = (
            "False", "WaitingForConsent",
            "accepted, but the provider has not consented: run `annexctl peer` with its "
            "kubeconfig, or redeem a peering token its admin generated")
    before = next((c for c in foreign.status.conditions if c.type == ACCEPTED_CONDITION), None)
    if before is not None and before.status.value == status and before.reason == reason:
        stamp = rfc3339(before.last_transition_time) if before.last_transition_time else (
            rfc3339(now))
    else:
        stamp = rfc3339(now)
    return [{"type": ACCEPTED_CONDITION, "status": status, "reason": reason,
             "message": message, "lastTransitionTime": stamp}]


def status(foreign: ForeignCluster, sightings: Sequence[Sighting], *, credentials: bool,
           virtual_node: str | None, offer: Mapping[str, str] | None, now: datetime,
           looking: bool = True, refused: str | None = None) -> dict[str, Any] | None:
    """The status to write, or None when the current one says it already (nothing is written
    while nothing changes: a refreshed announcement is no change). `looking`: whether the
    source of its last announcement is looking now (if not, what it said stays as it was);
    `refused`: why its VirtualNode cannot be created (the name is another cluster's)."""
    desired: dict[str, Any] = {
        "phase": phase(credentials, virtual_node).value,
        "discovery": _discovery(foreign, sightings, looking),
        "virtualNode": virtual_node,
        "offer": offer_summary(offer) if offer is not None else (
            foreign.status.offer.to_wire() if foreign.status.offer else None),
        "conditions": _accepted_condition(foreign, credentials, virtual_node, now, refused),
    }
    current = foreign.status.to_wire()
    if _present(current, desired) == _present(desired, desired):
        return None
    return desired


def _present(status: Mapping[str, Any], keys: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of `keys` that `status` sets (the wire omits an empty list or a null)."""
    return {key: status[key] for key in keys if status.get(key) not in (None, [])}


def virtual_node(foreign: ForeignCluster, namespace: str, secret_name: str) -> dict[str, Any]:
    """The VirtualNode an accepted provider gets: named after its cluster id, in the home
    controller's namespace, its kubeconfig the consented Secret."""
    cluster_id = foreign.spec.cluster_id
    return {**VIRTUAL_NODE.type_meta(),
            "metadata": {"name": cluster_id, "namespace": namespace,
                         "labels": {REMOTE_CLUSTER_ID_LABEL: cluster_id}},
            "spec": {"clusterId": cluster_id, "kubeconfigSecretRef": {"name": secret_name}}}


def cordon_patch(node: Mapping[str, Any], offer: Mapping[str, str] | None
                 ) -> dict[str, Any] | None:
    """The virtual node follows its provider's offer: cordoned when it offers nothing (no new
    pod is scheduled there; the running ones stay), uncordoned when it offers again if the
    cordon was for that. None: nothing to change (or the offer is not known yet)."""
    if offer is None:
        return None
    metadata = node.get("metadata") or {}
    ours = CORDONED_FOR_EMPTY_OFFER in (metadata.get("annotations") or {})
    cordoned = bool((node.get("spec") or {}).get("unschedulable"))
    if offer_is_empty(offer):
        if cordoned:
            return None  # ours already, or a user's: theirs to lift
        return {"metadata": {"annotations": {CORDONED_FOR_EMPTY_OFFER: "true"}},
                "spec": {"unschedulable": True}}
    if ours:
        return {"metadata": {"annotations": {CORDONED_FOR_EMPTY_OFFER: None}},
                "spec": {"unschedulable": None}}
    return None
