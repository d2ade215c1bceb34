"""Wiring: kopf in standalone, clusterwide mode with its own registry, thin event handlers that
hand each object to the component that owns its rule, the webhook and the health server."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf

from annex.kube import ClientLimits, kopf_login, load_connection
from annex.kubeapi import ClusterApi
from annex.probes import serve_probes
from remote_enforcer.admission import Admission, start_webhook
from remote_enforcer.certs import reload_on_change, server_context
from remote_enforcer.ledger import UsageLedger
from remote_enforcer.metrics import Metrics
from remote_enforcer.namespaces import NamespaceMapper
from remote_enforcer.offer import OfferPublisher
from remote_enforcer.quota_status import write_quota_status
from remote_enforcer.settings import Settings
from remote_enforcer.shadowpods import ShadowPodEnforcer, shadowpod_path
from shared.api.namespace_map import NAMESPACE_MAP
from shared.api.shadowpod import SHADOWPOD
from shared.wellknown import ORIGIN_CLUSTER_LABEL, TENANT_NAMESPACE_LABEL

log = logging.getLogger(__name__)


def build_registry(login: kopf.ConnectionInfo, shadowpods: ShadowPodEnforcer,
                   namespaces: NamespaceMapper, offers: OfferPublisher) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def _login(**_: Any) -> kopf.ConnectionInfo:
        return login

    @kopf.on.event(SHADOWPOD.group, SHADOWPOD.version, SHADOWPOD.plural, registry=registry)
    async def _shadowpod(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
        await shadowpods.on_shadowpod_event(event.get("type"), dict(body))

    @kopf.on.event("v1", "pods", registry=registry)
    async def _pod(event: kopf.RawEvent, body: kopf.Body, namespace: str | None, name: str,
                   **_: Any) -> None:
        pod = dict(body)
        offers.on_pod(event.get("type"), pod)
        if ORIGIN_CLUSTER_LABEL in (body.metadata.labels or {}):
            deleted = event.get("type") == "DELETED"
            await shadowpods.reconcile(namespace or "", name, last_pod=pod if deleted else None)

    @kopf.on.event("v1", "nodes", registry=registry)
    async def _node(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
        offers.on_node(event.get("type"), dict(body))

    @kopf.on.event("v1", "namespaces", labels={TENANT_NAMESPACE_LABEL: "true"},
                   registry=registry)
    async def _tenant(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
        offers.on_tenant(event.get("type"), dict(body))

    @kopf.on.event(NAMESPACE_MAP.group, NAMESPACE_MAP.version, NAMESPACE_MAP.plural,
                   registry=registry)
    async def _namespace_map(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
        # A deletion is handled while the map is held by our finalizer (its deletionTimestamp).
        if event.get("type") != "DELETED":
            await namespaces.reconcile(dict(body))

    return registry


def kopf_settings(settings: Settings) -> kopf.OperatorSettings:
    configured = kopf.OperatorSettings()
    configured.batching.worker_limit = settings.workers or None
    # An idle per-object worker holds a slot this long: short, or new objects wait for slots.
    configured.batching.idle_timeout = settings.worker_idle_seconds
    configured.posting.level = logging.WARNING
    configured.watching.server_timeout = 300
    configured.networking.request_timeout = 30
    return configured


async def run(settings: Settings, stop: asyncio.Event | None = None) -> None:
    if settings.log_level.upper() != "DEBUG":
        # kopf logs every handled event at INFO: at thousands of pods, that is noise.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    limits = ClientLimits(qps=settings.qps, burst=settings.burst)
    connection = load_connection(settings.kubeconfig, limits=limits)
    login = kopf_login(connection)
    ssl_context = server_context(settings.webhook_cert, settings.webhook_key,
                                 settings.webhook_hosts, settings.webhook_cert_dir)
    ready = asyncio.Event()
    # kopf does the watching; reads are cheap and kept unthrottled, writes are paced.
    api = ClusterApi(connection, throttle_reads=False)
    try:
        metrics = Metrics()
        shadowpods = ShadowPodEnforcer(api, metrics)
        offers = OfferPublisher(api, settings)
        registry = build_registry(login, shadowpods, NamespaceMapper(api, settings.cluster_id),
                                  offers)
        ledger = UsageLedger()
        metrics.gauges["shadowpods_counted"] = (
            "Non-terminal ShadowPods counted against quotas.", lambda: float(len(ledger)))
        ledger_loop = asyncio.create_task(ledger.run(api, shadowpod_path("")), name="ledger")
        webhook = await start_webhook(Admission(api, ledger), metrics, settings.webhook_address,
                                      settings.webhook_port, ssl_context)
        health = await serve_probes(settings.health_address, settings.health_port,
                                    ready=ready.is_set, not_ready="starting",
                                    scrape=metrics.exposition)
        offer_loop = asyncio.create_task(offers.run(), name="offer")
        kopf_ready = asyncio.Event()
        quota_loop = asyncio.create_task(write_quota_status(
            api, ledger, settings.offer_debounce_seconds), name="quota-status")
        background = [offer_loop, ledger_loop, quota_loop]
        if settings.webhook_cert and settings.webhook_key:
            background.append(asyncio.create_task(reload_on_change(
                ssl_context, settings.webhook_cert, settings.webhook_key), name="cert-reload"))

        async def readiness() -> None:
            # Ready once kopf runs and the quota ledger holds every ShadowPod.
            await kopf_ready.wait()
            await ledger.synced.wait()
            ready.set()
        ready_task = asyncio.create_task(readiness(), name="readiness")
        log.info("enforcer %s: webhook on %s:%d, health on %s:%d", settings.cluster_id,
                 settings.webhook_address, settings.webhook_port, settings.health_address,
                 settings.health_port)
        try:
            await kopf.operator(registry=registry, settings=kopf_settings(settings),
                                standalone=True, clusterwide=True, ready_flag=kopf_ready,
                                stop_flag=stop)
        finally:
            for task in [*background, ready_task]:
                task.cancel()
            await webhook.cleanup()
            await health.cleanup()
    finally:
        await api.close()
