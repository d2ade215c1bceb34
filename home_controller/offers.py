"""What each consented provider offers, read as the consumer identity its Secret holds: one
list+watch of the ResourceOffers in the tenant namespace the kubeconfig's context names (the
identity may read nothing else there). A change of the offer names the provider to `changed`
(the ForeignCluster controller's queue); a deleted offer is an offer of nothing (withdrawn).
The pools it declares are kept too: the agents' admission lets an agent make only their nodes.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Callable
from typing import Any

from annex.api_paths import custom_path
from annex.kube import connection_from_kubeconfig
from annex.kubeapi import ClusterApi
from annex.listwatch import list_and_watch
from shared.api.resource_offer import RESOURCE_OFFER

log = logging.getLogger(__name__)


def context_namespace(kubeconfig: dict[str, Any]) -> str | None:
    current = kubeconfig.get("current-context")
    for entry in kubeconfig.get("contexts") or []:
        if isinstance(entry, dict) and entry.get("name") == current:
            namespace = (entry.get("context") or {}).get("namespace")
            return str(namespace) if namespace else None
    return None


class OfferWatches:
    def __init__(self, changed: Callable[[str], None]) -> None:
        self._changed = changed
        self._watches: dict[str, tuple[str, asyncio.Task[None], ClusterApi]] = {}
        self._offers: dict[str, dict[str, dict[str, str]]] = {}
        """cluster id → offer name → its resources."""
        self._pools: dict[str, dict[str, frozenset[str]]] = {}
        """cluster id → offer name → the names of the pools it declares."""

    def resources(self, cluster_id: str) -> dict[str, str] | None:
        """What the provider offers now (the first of its offers); {} withdrawn; None while
        unknown."""
        offers = self._offers.get(cluster_id)
        if offers is None:
            return None
        return offers[min(offers)] if offers else {}

    def pools(self, cluster_id: str) -> frozenset[str] | None:
        """The pools the provider's offer declares now (the first of its offers; none when
        withdrawn); None while unknown."""
        if cluster_id not in self._offers:
            return None
        pools = self._pools.get(cluster_id) or {}
        return pools[min(pools)] if pools else frozenset()

    def follow(self, cluster_id: str, kubeconfig: dict[str, Any] | None) -> None:
        """Watch the provider's offer with `kubeconfig` (again, when it changed); stop when
        there is none."""
        if kubeconfig is None:
            self.stop(cluster_id)
            return
        fingerprint = hashlib.sha256(json.dumps(kubeconfig, sort_keys=True).encode()).hexdigest()
        if cluster_id in self._watches and self._watches[cluster_id][0] == fingerprint:
            return
        self.stop(cluster_id)
        namespace = context_namespace(kubeconfig)
        try:
            api = ClusterApi(connection_from_kubeconfig(kubeconfig), throttle_reads=False)
        except ValueError as error:
            log.warning("%s: cannot read its offer: %s", cluster_id, error)
            return
        if not namespace:
            log.warning("%s: the consumer kubeconfig names no tenant namespace: offer unknown",
                        cluster_id)
            return

        def sink(event_type: str, offer: dict[str, Any]) -> None:
            offers = self._offers.setdefault(cluster_id, {})
            pools = self._pools.setdefault(cluster_id, {})
            before = self.resources(cluster_id)
            name = offer["metadata"]["name"]
            if event_type == "DELETED":
                offers.pop(name, None)
                pools.pop(name, None)
            else:
                spec = offer.get("spec") or {}
                offers[name] = dict(spec.get("resources") or {})
                pools[name] = frozenset(str(pool.get("name")) for pool in spec.get("pools") or []
                                        if isinstance(pool, dict))
            if self.resources(cluster_id) != before:
                self._changed(cluster_id)

        def listed() -> None:
            if self._offers.setdefault(cluster_id, {}) == {}:
                self._changed(cluster_id)  # listed and empty: nothing offered

        task = asyncio.get_running_loop().create_task(
            list_and_watch(api, custom_path(RESOURCE_OFFER, namespace), sink, on_listed=listed,
                           name=f"offer-{cluster_id}"), name=f"offer-{cluster_id}")
        self._watches[cluster_id] = (fingerprint, task, api)

    def stop(self, cluster_id: str) -> None:
        watch = self._watches.pop(cluster_id, None)
        self._offers.pop(cluster_id, None)
        self._pools.pop(cluster_id, None)
        if watch is not None:
            _, task, api = watch
            task.cancel()
            task.add_done_callback(lambda _: asyncio.ensure_future(api.close()))

    async def close(self) -> None:
        for cluster_id in list(self._watches):
            _, task, api = self._watches.pop(cluster_id)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await api.close()
