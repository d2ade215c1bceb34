"""What the enforcer watches and where every watch event goes, declared in one place (the
enforcer's informer registry, `annex.informers`, as the home agent's `home_agent.routes`): per
resource, the watch that lists it, the mirror that holds it and, in order, the routes its
changes take. The registry applies an event to the mirror before any route, so a route reads
every mirror as it is after the event.

One cluster, one side (`CLUSTER`) and one watch (`WATCH`), cluster-wide: twin namespaces come
and go, and RBAC cannot grant "the namespaces labelled as twins".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from annex.informers import Callback, Change, Informers
from remote_enforcer.consumers import Consumers
from remote_enforcer.ledger import UsageLedger
from remote_enforcer.metrics import Metrics
from remote_enforcer.namespaces import NamespaceMaps, TwinNamespaceLabels
from remote_enforcer.node_failure import NodeFailures
from remote_enforcer.object_admission import PodAddresses
from remote_enforcer.offer import OfferPublisher, node_view
from remote_enforcer.quota_status import QuotaStatus
from remote_enforcer.shadowpods import ShadowPodEnforcer
from shared.api.builtin import NAMESPACES, NODES, PERSISTENTVOLUMECLAIMS, PODS
from shared.api.namespace_map import NAMESPACE_MAP
from shared.api.quota import QUOTA
from shared.api.shadowpod import SHADOWPOD
from shared.wellknown import ORIGIN_CLUSTER_LABEL

CLUSTER = "cluster"
WATCH = "enforcer"



def consumer_pod(pod: dict[str, Any]) -> dict[str, Any] | None:
    """What the pods' mirror keeps: the pods ShadowPods make (their origin label); the others
    only pass through the routes (the offer, the addresses, the metrics)."""
    return pod if ORIGIN_CLUSTER_LABEL in (pod["metadata"].get("labels") or {}) else None


def nothing(_: dict[str, Any]) -> None:
    """The claims' mirror keeps nothing: the ledger counts what it needs of them."""
    return None


def declare_watches(informers: Informers) -> None:
    """Every resource the enforcer lists and watches, with what its mirror keeps."""
    informers.watch(CLUSTER, PODS.resource, consumer_pod, by=WATCH)
    informers.watch(CLUSTER, SHADOWPOD.resource, by=WATCH)
    informers.watch(CLUSTER, NAMESPACES.resource, by=WATCH)
    informers.watch(CLUSTER, NODES.resource, node_view, by=WATCH)
    informers.watch(CLUSTER, QUOTA.resource, by=WATCH)
    informers.watch(CLUSTER, PERSISTENTVOLUMECLAIMS.resource, nothing, by=WATCH)
    informers.watch(CLUSTER, NAMESPACE_MAP.resource, by=WATCH)


def sink(handler: Callable[[str, dict[str, Any]], object]) -> Callback:
    """A route to a handler of (event type, object), as the watch sent it."""
    def route(change: Change) -> None:
        handler(str(change.event_type), change.obj)
    return route


@dataclass(frozen=True)
class Parts:
    """What the routes feed."""

    consumers: Consumers
    ledger: UsageLedger
    metrics: Metrics
    shadowpods: ShadowPodEnforcer
    node_failures: NodeFailures
    offers: OfferPublisher
    twins: TwinNamespaceLabels
    namespace_maps: NamespaceMaps
    quota_status: QuotaStatus
    pod_addresses: PodAddresses


def declare_routes(informers: Informers, parts: Parts) -> None:
    on = informers.on
    on(CLUSTER, "pods", parts.shadowpods.on_pod)
    on(CLUSTER, "pods", sink(parts.offers.on_pod))
    on(CLUSTER, "pods", sink(parts.metrics.pods.on_pod))
    on(CLUSTER, "pods", sink(parts.pod_addresses.on_pod))
    on(CLUSTER, "pods", parts.node_failures.on_pod)
    on(CLUSTER, "shadowpods", sink(parts.ledger.apply))
    on(CLUSTER, "shadowpods", parts.shadowpods.on_shadowpod)
    on(CLUSTER, "namespaces", parts.twins.on_namespace)
    on(CLUSTER, "namespaces", sink(parts.offers.on_namespace))
    on(CLUSTER, "namespaces", parts.shadowpods.on_namespace)
    on(CLUSTER, "namespaces", parts.namespace_maps.on_namespace)
    on(CLUSTER, "nodes", parts.offers.on_node, compares=True)
    on(CLUSTER, "nodes", parts.node_failures.on_node)
    on(CLUSTER, "quotas", parts.twins.on_quota)
    on(CLUSTER, "quotas", parts.shadowpods.on_quota)
    on(CLUSTER, "quotas", parts.namespace_maps.on_quota)
    on(CLUSTER, "quotas", parts.quota_status.on_quota)
    on(CLUSTER, "quotas", parts.offers.on_quota)
    # the reflected claims (the origin label): their storage counts against quotas
    on(CLUSTER, "persistentvolumeclaims", sink(parts.ledger.apply_claim))
    on(CLUSTER, "namespacemaps", parts.namespace_maps.on_map)
