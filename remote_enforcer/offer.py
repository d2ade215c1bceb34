"""ResourceOffer per consumer, in its tenant namespace: a fixed amount, or a share of what the
schedulable nodes have free. Node and pod events only update the picture (the nodes' mirror, the
pods' requests); a change schedules each tenant namespace's offer for a reconcile after the
debounce (`--offer-debounce-seconds`, one pending look per tenant however many events come),
which writes an offer only when it moved by more than the threshold."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from annex.api_paths import custom_path
from annex.controller import DONE, Controller, Result
from annex.informers import Change
from annex.kubeapi import JSON_PATCH, ClusterApi
from annex.mirror import Mirror
from annex.writes import create_or_refuse
from remote_enforcer.settings import Settings
from shared import offer as offer_rules
from shared.api.resource_offer import RESOURCE_OFFER
from shared.pools import Pool, lent_pools
from shared.wellknown import (
    ORIGIN_CLUSTER_LABEL,
    PROVIDER_LABEL,
    REGION_LABEL,
    REMOTE_CLUSTER_ID_LABEL,
    RESOURCE_OFFER_NAME,
    TENANT_NAMESPACE_LABEL,
)

log = logging.getLogger(__name__)

_AMOUNTS = ("resources", "maxPodResources")
"""The offer's quantities: rewritten only when one moved by more than the threshold."""


def offer_path(namespace: str, name: str = "") -> str:
    return custom_path(RESOURCE_OFFER, namespace, name)


def node_view(node: dict[str, Any]) -> dict[str, Any]:
    """What the nodes' mirror keeps of a node: what the offer counts (schedulable, allocatable,
    platform, the labels its pools select by) and when it stopped being Ready
    (`node_failure`)."""
    metadata = node.get("metadata") or {}
    return {"metadata": {"name": metadata.get("name"), "labels": metadata.get("labels") or {},
                         "creationTimestamp": metadata.get("creationTimestamp")},
            "spec": node.get("spec") or {},
            "status": {k: (node.get("status") or {}).get(k)
                       for k in ("allocatable", "conditions", "nodeInfo")}}


class OfferPublisher:
    """Keys: tenant namespaces. Reads the nodes' mirror and the pools each consumer's Quota
    lends it (`lent`, by name; None: every pool); fed by the routes of nodes (`on_node`), pods
    (`on_pod`), namespaces (`on_namespace`) and Quotas (`on_quota`)."""

    def __init__(self, api: ClusterApi, settings: Settings, nodes: Mirror,
                 lent: Callable[[str], Sequence[str] | None] = lambda consumer: None) -> None:
        self.api = api
        self.settings = settings
        self.nodes = nodes
        self.lent = lent
        self._lent_seen: dict[str, tuple[str, ...] | None] = {}
        """Per consumer, the pools its last offer was made with (by name)."""
        # pod uid -> (origin consumer or "", node, requests)
        self.pods: dict[str, tuple[str, str, dict[str, Decimal]]] = {}
        self.tenants: dict[str, str] = {}  # tenant namespace -> consumer id
        self.published: dict[str, dict[str, Any]] = {}  # tenant namespace -> offer spec
        self._scheduled: set[str] = set()
        """Tenant namespaces whose look after the debounce is pending."""
        self._nodes: tuple[int, list[dict[str, Any]]] = (-1, [])
        """The nodes' mirror decoded, with the mirror's version it was read at."""
        self.listed = asyncio.Event()
        """Set once the picture holds the first lists of nodes, pods and namespaces: no offer
        from a half-listed picture (it would under-count what runs)."""
        self.controller: Controller[str] = Controller(
            "offers", self._reconcile, workers=1, synced=self.listed.is_set)

    def node_list(self) -> list[dict[str, Any]]:
        """The nodes as the mirror holds them, decoded once per change of the mirror, not once
        per tenant and look."""
        version = self.nodes.version
        if self._nodes[0] != version:
            self._nodes = (version, self.nodes.values())
        return self._nodes[1]

    # --- the picture, from events -------------------------------------------------------
    def _changed(self) -> None:
        """The picture moved: every tenant's offer is looked at once the debounce passed."""
        for tenant in self.tenants:
            self._schedule(tenant)

    def _schedule(self, tenant: str) -> None:
        if tenant not in self._scheduled:
            self._scheduled.add(tenant)
            self.controller.queue.add_after(tenant, self.settings.offer_debounce_seconds)

    def on_node(self, change: Change) -> None:
        after = None if change.deleted else node_view(change.obj)
        if _capacity_view(change.before) != _capacity_view(after):
            self._changed()

    def on_pod(self, event_type: str | None, pod: dict[str, Any]) -> None:
        uid = pod["metadata"]["uid"]
        reservation = None if event_type == "DELETED" else offer_rules.pod_reservation(pod)
        before = self.pods.get(uid)
        if reservation is None:
            self.pods.pop(uid, None)
        else:
            origin = (pod["metadata"].get("labels") or {}).get(ORIGIN_CLUSTER_LABEL, "")
            self.pods[uid] = (origin, *reservation)
        if before != self.pods.get(uid):
            self._changed()

    def on_namespace(self, event_type: str | None, namespace: dict[str, Any]) -> None:
        """Tenant namespaces (the tenant label) are offered to their consumer."""
        name = namespace["metadata"]["name"]
        labels = namespace["metadata"].get("labels") or {}
        consumer = labels.get(REMOTE_CLUSTER_ID_LABEL)
        if (event_type == "DELETED" or not consumer or labels.get(TENANT_NAMESPACE_LABEL) != "true"
                or namespace["metadata"].get("deletionTimestamp")):
            self.tenants.pop(name, None)
            self.published.pop(name, None)
        elif self.tenants.get(name) != consumer:
            self.tenants[name] = consumer
            self._schedule(name)

    def on_quota(self, change: Change) -> None:
        """A Quota lending its consumer other pools: that consumer's offers are looked at."""
        consumer = str((change.obj.get("spec") or {}).get("consumerClusterId"))
        if consumer in self._lent_seen and self._lent_names(consumer) != self._lent_seen[consumer]:
            for tenant, tenant_consumer in self.tenants.items():
                if tenant_consumer == consumer:
                    self._schedule(tenant)

    # --- computing and writing ------------------------------------------------------------
    async def offered(self, consumer: str) -> dict[str, str]:
        """What the consumer is offered: the offer last written (or read) in its tenant
        namespace, else the one about to be written (the next run writes it). Admission limits
        what a Quota does not list by this (shared.quota.limits_for)."""
        await self.listed.wait()
        for tenant, tenant_consumer in self.tenants.items():
            if tenant_consumer == consumer and tenant in self.published:
                return dict(self.published[tenant].get("resources") or {})
        return self.resources_for(consumer)

    def _reservations(self, consumer: str) -> list[tuple[str, dict[str, Decimal]]]:
        # The consumer's own pods do not shrink its offer: they are already inside it.
        return [(node, requests) for origin, node, requests in self.pods.values()
                if origin != consumer]

    def _lent_names(self, consumer: str) -> tuple[str, ...] | None:
        lent = self.lent(consumer)
        return None if lent is None else tuple(lent)

    def pools_for(self, consumer: str) -> list[Pool]:
        """The provider's pools the consumer is lent (its Quota's `pools`; every pool without)."""
        return lent_pools(self.settings.offer_pools, self._lent_names(consumer))

    def lent_nodes(self, consumer: str) -> Sequence[Mapping[str, Any]]:
        """The nodes the consumer's offer counts: every node, or once pools are declared those
        of some pool the consumer is lent."""
        if not self.settings.offer_pools:
            return self.node_list()
        pools = self.pools_for(consumer)
        return [node for node in self.node_list() if any(pool.holds(node) for pool in pools)]

    def resources_for(self, consumer: str, nodes: Sequence[Mapping[str, Any]] | None = None
                      ) -> dict[str, str]:
        """What `nodes` (default: `lent_nodes`) lend the consumer."""
        nodes = self.lent_nodes(consumer) if nodes is None else nodes
        extended = self.settings.offer_extended_resources
        free = offer_rules.free_resources(nodes, self._reservations(consumer), extended)
        if self.settings.offer_mode == "share":
            return offer_rules.share(free, self.settings.offer_percent)
        resources = dict(self.settings.offer_resources)
        resources.setdefault("pods", str(offer_rules.allocatable_pods(nodes)))
        # Listed devices the fixed amounts do not name are lent as the nodes have them.
        for name, text in offer_rules.share(free, Decimal(100)).items():
            if name not in offer_rules.OFFERED_RESOURCES:
                resources.setdefault(name, text)
        return resources

    def max_pod_resources_for(self, offered: dict[str, str],
                              nodes: Sequence[Mapping[str, Any]]) -> dict[str, str]:
        # Here the consumer's own pods count: they hold room on the nodes a next pod needs.
        largest = offer_rules.largest_free(nodes,
                                           [(node, requests) for _, node, requests
                                            in self.pods.values()],
                                           self.settings.offer_extended_resources)
        return offer_rules.max_pod_resources(largest, offered)

    def pool_offers(self, consumer: str, labels: dict[str, str]) -> list[dict[str, Any]]:
        """Each lent pool's entry of the offer: what its nodes lend (a fixed offer's amounts
        cap each pool, never split between them), and what one pod can get there."""
        offers = []
        for pool in self.pools_for(consumer):
            nodes = pool.nodes(self.node_list())
            resources = self.resources_for(consumer, nodes)
            offers.append({
                "name": pool.name, "nodeSelector": dict(pool.selector),
                "resources": resources,
                "maxPodResources": self.max_pod_resources_for(resources, nodes),
                "labels": {**labels, **dict(pool.selector)},
                **offer_rules.node_platform(nodes)})
        return offers

    def spec_for(self, consumer: str) -> dict[str, Any]:
        labels = {key: value for key, value in ((REGION_LABEL, self.settings.region),
                                                (PROVIDER_LABEL, self.settings.provider)) if value}
        self._lent_seen[consumer] = self._lent_names(consumer)
        nodes = self.lent_nodes(consumer)
        resources = self.resources_for(consumer, nodes)
        spec = {
            "clusterId": self.settings.cluster_id,
            "consumerClusterId": consumer,
            "resources": resources,
            "maxPodResources": self.max_pod_resources_for(resources, nodes),
            "labels": labels,
            "storageClasses": [{"name": n, "default": i == 0}
                               for i, n in enumerate(self.settings.storage_classes)],
            "ingressClasses": [{"name": n, "default": i == 0}
                               for i, n in enumerate(self.settings.ingress_classes)],
            **offer_rules.node_platform(nodes),
        }
        if self.settings.offer_pools:
            spec["pools"] = self.pool_offers(consumer, labels)
        return spec

    def _worth_writing(self, old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
        if old is None:
            return True
        old_pools, new_pools = old.get("pools") or [], new.get("pools") or []
        if len(old_pools) != len(new_pools):
            return True
        return any(self._moved(before, after)
                   for before, after in ((old, new), *zip(old_pools, new_pools, strict=True)))

    def _moved(self, old: dict[str, Any], new: dict[str, Any]) -> bool:
        """Whether the offer (or a pool's entry) changed enough to be written: anything but its
        amounts, or an amount by more than the threshold."""
        if {k: v for k, v in old.items() if k not in (*_AMOUNTS, "pools")} != {
                k: v for k, v in new.items() if k not in (*_AMOUNTS, "pools")}:
            return True
        return any(offer_rules.differs_enough(old.get(key) or {}, new[key],
                                              self.settings.offer_threshold_percent)
                   for key in _AMOUNTS)

    async def publish(self, tenant: str, consumer: str) -> None:
        spec = self.spec_for(consumer)
        if tenant not in self.published:
            existing = await self.api.find(offer_path(tenant, RESOURCE_OFFER_NAME))
            if existing is not None:
                self.published[tenant] = existing.get("spec") or {}
        if not self._worth_writing(self.published.get(tenant), spec):
            return
        body = {**RESOURCE_OFFER.type_meta(),
                "metadata": {"name": RESOURCE_OFFER_NAME, "namespace": tenant}, "spec": spec}
        created = False
        if tenant not in self.published:  # none found: made, unless made meanwhile
            _, created = await create_or_refuse(self.api, offer_path(tenant),
                                                offer_path(tenant, RESOURCE_OFFER_NAME), body,
                                                _ours)
        if not created:
            # The whole spec, replaced: a merge patch would keep what the offer no longer says
            # (a label of a region no longer given), and every later look would write again.
            await self.api.patch(offer_path(tenant, RESOURCE_OFFER_NAME),
                                 [{"op": "replace", "path": "/spec", "value": spec}], JSON_PATCH)
        self.published[tenant] = spec
        log.info("published offer for %s in %s: %s", consumer, tenant, spec["resources"])

    async def _reconcile(self, tenant: str) -> Result:
        self._scheduled.discard(tenant)  # a change from now on is looked at again
        consumer = self.tenants.get(tenant)
        if consumer is not None:
            await self.publish(tenant, consumer)
        return DONE


def _ours(_: object) -> bool:
    """The tenant namespace's offer is the enforcer's (the consumer may only read it)."""
    return True


def _capacity_view(node: dict[str, Any] | None) -> Any:
    if node is None:
        return None
    info = (node.get("status") or {}).get("nodeInfo") or {}
    # Every allocatable quantity: which extended resources are lent is the publisher's choice.
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return (offer_rules.node_is_schedulable(node), allocatable,
            info.get("architecture"), info.get("kubeletVersion"),
            (node.get("metadata") or {}).get("labels") or {})
