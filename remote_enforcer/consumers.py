"""What the enforcer knows of its consumers, from the mirrors of namespaces and Quotas:
which consumer a twin namespace belongs to, its Quota, its pod policy and its service policy.
Admission, pod creation and twin-namespace labelling all decide from this one view."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from annex.api_paths import core_path
from annex.kubeapi import ClusterApi
from annex.mirror import Mirror
from shared import quota as quota_rules
from shared.api.quota import NamespacePolicy, PodPolicy, ServicePolicy
from shared.ownership import is_owned
from shared.wellknown import ORIGIN_CLUSTER_LABEL


class Consumers:
    def __init__(self, cluster_id: str, namespaces: Mirror, quotas: Mirror) -> None:
        self.cluster_id = cluster_id
        self.namespaces = namespaces
        self.quotas = quotas
        self.listed = asyncio.Event()
        """Set once both caches hold their first list: until then a Quota could be missed."""
        self.offered: Callable[[str], Awaitable[dict[str, str]]] = _nothing_offered
        """What the provider offers a consumer (the OfferPublisher's `offered`)."""

    async def limits(self, consumer: str) -> dict[str, quota_rules.QuantityLike]:
        """What the consumer's pods and claims are admitted against: its Quota's resources,
        and its offer for the rest (never unlimited, with a Quota or without)."""
        spec = self._spec(consumer)
        return quota_rules.limits_for(spec.get("resources"), await self.offered(consumer))

    def namespace_policy(self, consumer: str) -> NamespacePolicy:
        """The consumer's twin namespace policy: its Quota's, or the default without one."""
        spec = self._spec(consumer)
        return NamespacePolicy.model_validate(spec.get("namespacePolicy") or {})

    def _spec(self, consumer: str) -> dict[str, Any]:
        """The consumer's Quota spec; empty without a Quota (the defaults then hold)."""
        return dict((self.quota(consumer) or {}).get("spec") or {})

    def lent_pools(self, consumer: str) -> list[str] | None:
        """The provider's pools its Quota lends the consumer, by name (None: every pool)."""
        pools = self._spec(consumer).get("pools")
        return None if pools is None else [str(name) for name in pools]

    def quota(self, consumer: str) -> dict[str, Any] | None:
        return next((q for q in self.quotas.values()
                     if (q.get("spec") or {}).get("consumerClusterId") == consumer), None)

    def pod_policy(self, consumer: str) -> PodPolicy:
        """The consumer's policy: its Quota's, or the default (baseline) without a Quota."""
        spec = self._spec(consumer)
        return PodPolicy.model_validate(spec.get("podPolicy") or {})

    def service_policy(self, consumer: str) -> ServicePolicy:
        """What the consumer may expose: its Quota's, or the default (closed) without one."""
        spec = self._spec(consumer)
        return ServicePolicy.model_validate(spec.get("servicePolicy") or {})

    async def namespace(self, api: ClusterApi, name: str) -> dict[str, Any] | None:
        """The namespace `name` from the cache once it holds its first list, read from the API
        server when the cache does not hold it yet (a twin namespace just made)."""
        await self.listed.wait()
        cached = self.namespaces.get(("", name))
        return cached if cached is not None else await api.find(core_path("namespaces", name=name))

    def twin_consumer(self, namespace: dict[str, Any] | None) -> str | None:
        """The consumer whose twin namespace this is (created by this enforcer for it), or None."""
        if namespace is None:
            return None
        consumer = ((namespace.get("metadata") or {}).get("labels") or {}).get(
            ORIGIN_CLUSTER_LABEL)
        return consumer if consumer and is_owned(namespace, consumer, self.cluster_id) else None

    def twin_namespaces(self, consumer: str) -> list[dict[str, Any]]:
        return [ns for ns in self.namespaces.values() if self.twin_consumer(ns) == consumer]


async def _nothing_offered(consumer: str) -> dict[str, str]:
    del consumer  # no offer publisher: nothing is offered
    return {}
