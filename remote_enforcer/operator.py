"""Wiring: the enforcer's own list+watches of pods, ShadowPods, namespaces, nodes and Quotas
feeding thin handlers that hand each object to the component that owns its rule; their
controllers (annex.controller), run until the operator stops; kopf (in standalone, clusterwide
mode with its own registry) for NamespaceMaps, with kopf's conventions (resume/create/update
and delete handlers, its finalizer, its retries); the webhook and the health server."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import kopf

from annex import tracing
from annex.controller import Controller
from annex.kube import ClientLimits, Connection, kopf_login, load_connection
from annex.kubeapi import REQUESTS, ClusterApi, core_path, custom_path
from annex.listwatch import Sink, list_and_watch
from annex.logs import reconciling
from annex.metrics import MetricsAccess, metrics_handler
from annex.metrics_kopf import counted_session
from annex.probes import serve_probes
from annex.reviews import Reviews
from remote_enforcer.admission import Admission, start_webhook
from remote_enforcer.certs import reload_on_change, server_context
from remote_enforcer.claim_admission import ClaimAdmission
from remote_enforcer.consumers import Consumers
from remote_enforcer.ledger import UsageLedger
from remote_enforcer.metrics import Metrics
from remote_enforcer.namespaces import NamespaceMapper, TwinNamespaceLabels
from remote_enforcer.node_failure import NodeFailures
from remote_enforcer.object_admission import ObjectAdmission, PodAddresses
from remote_enforcer.offer import OfferPublisher
from remote_enforcer.quota_status import write_quota_status
from remote_enforcer.settings import Settings
from remote_enforcer.shadowpods import ShadowPodEnforcer, shadowpod_path
from shared.api.namespace_map import NAMESPACE_MAP
from shared.api.quota import QUOTA
from shared.forge import tenancy
from shared.wellknown import (
    REMOTE_CLUSTER_ID_LABEL,
    TWIN_NAMESPACES_FINALIZER,
)

log = logging.getLogger(__name__)


# kopf's own records on each NamespaceMap (handler progress, the last handled spec, the finalizer
# it manages) are annotations of ours: status.currentMapping is the enforcer's to write, and the
# agent writes only spec. The finalizer keeps the name earlier versions put on maps they made.
ANNOTATIONS_PREFIX = "enforcer.annex.io"
# A failed API call (a conflict, throttling, the server away) is tried again this soon, for as
# long as it fails (kopf's default retries: unbounded).
API_RETRY_SECONDS = 2.0
CONTROLLER = "namespacemaps"
"""What the kopf handlers' log lines name as their controller (the runtime's are named by
their Controller)."""


def build_registry(connection: Connection, namespace_maps: NamespaceMapper,
                   resync_seconds: float) -> kopf.OperatorRegistry:
    """kopf serves NamespaceMaps only: converge on resume, create and spec change (again soon
    while a twin of ours is being deleted), look again every `resync_seconds` (a name somebody
    else holds, a twin deleted behind the enforcer's back), release the twins on delete."""
    registry = kopf.OperatorRegistry()
    resource = NAMESPACE_MAP.resource

    @kopf.on.login(registry=registry)
    async def _login(**_: Any) -> kopf.AiohttpSession:
        # Called again on a 401: a rotated token read afresh. Its requests are counted with
        # the enforcer's own (/metrics).
        return counted_session(kopf_login(connection), REQUESTS)

    @kopf.on.resume(*resource, registry=registry, backoff=API_RETRY_SECONDS)
    @kopf.on.create(*resource, registry=registry, backoff=API_RETRY_SECONDS)
    @kopf.on.update(*resource, field="spec", registry=registry, backoff=API_RETRY_SECONDS)
    async def converge(namespace: str | None, name: str, **_: Any) -> None:
        namespace = str(namespace)  # NamespaceMaps are namespaced
        with reconciling(CONTROLLER, namespace, name), \
                tracing.reconcile_span(CONTROLLER, namespace, name):
            mapping = await namespace_maps.converge(namespace, name)
        if mapping is None:
            raise kopf.PermanentError(f"not in a tenant namespace (no {REMOTE_CLUSTER_ID_LABEL} "
                                      f"label on namespace {namespace}): ignored")
        if (terminating := tenancy.terminating_twins(mapping)) is not None:
            raise kopf.TemporaryError(terminating, delay=tenancy.TERMINATING_RETRY_SECONDS)

    # Quietly: a name that stays taken is in the map's status, not in an Event every 30 s.
    @kopf.timer(*resource, registry=registry, interval=resync_seconds,
                initial_delay=resync_seconds)
    async def resync(namespace: str | None, name: str, spec: kopf.Spec, status: kopf.Status,
                     **_: Any) -> None:
        if tenancy.needs_resync(spec.get("desiredMapping") or {},
                                status.get("currentMapping") or {}, namespace_maps.twin_exists):
            with reconciling(CONTROLLER, namespace, name), \
                    tracing.reconcile_span(CONTROLLER, namespace, name):
                await namespace_maps.converge(str(namespace), name)

    @kopf.on.delete(*resource, registry=registry, backoff=API_RETRY_SECONDS)
    async def release(namespace: str | None, name: str, **_: Any) -> None:
        with reconciling(CONTROLLER, namespace, name), \
                tracing.reconcile_span(CONTROLLER, namespace, name):
            await namespace_maps.release(str(namespace), name)

    return registry


def fanned_out(*sinks: Sink) -> Sink:
    """One watch's events, to each of `sinks` in turn."""
    def sink(event_type: str, obj: dict[str, Any]) -> None:
        for each in sinks:
            each(event_type, obj)
    return sink


def kopf_settings(settings: Settings) -> kopf.OperatorSettings:
    configured = kopf.OperatorSettings()
    configured.batching.worker_limit = settings.workers
    # An idle per-object worker holds a slot this long: short, or new objects wait for slots.
    configured.batching.idle_timeout = settings.worker_idle_seconds
    configured.posting.level = logging.WARNING
    configured.watching.server_timeout = 300
    configured.networking.request_timeout = 30
    configured.persistence.finalizer = TWIN_NAMESPACES_FINALIZER
    configured.persistence.progress_storage = kopf.AnnotationsProgressStorage(
        prefix=ANNOTATIONS_PREFIX)
    configured.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=ANNOTATIONS_PREFIX)
    return configured


async def run(settings: Settings, stop: asyncio.Event | None = None) -> None:
    if settings.log_level.upper() != "DEBUG":
        # kopf logs every handled event at INFO: noise.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    limits = ClientLimits(qps=settings.qps, burst=settings.burst)
    connection = load_connection(settings.kubeconfig, limits=limits)
    ssl_context = server_context(settings.webhook_cert, settings.webhook_key,
                                 settings.webhook_hosts, settings.webhook_cert_dir)
    ready = asyncio.Event()
    # Reads are watches (and a few live reads that guard writes): unthrottled; writes are paced.
    api = ClusterApi(connection, throttle_reads=False)
    try:
        metrics = Metrics()
        ledger = UsageLedger()
        consumers = Consumers(settings.cluster_id)
        admission = Admission(api, ledger, consumers)
        pod_addresses = PodAddresses()  # the twin pods' addresses EndpointSlices may point at
        shadowpods = ShadowPodEnforcer(api, metrics, consumers, settings.workers)
        node_failures = NodeFailures(api, shadowpods.pods, shadowpods.shadowpods,
                                     shadowpods.events, settings.node_failure_grace_seconds)
        offers = OfferPublisher(api, settings)
        consumers.offered = offers.offered  # admission limits what a Quota does not list by it
        twins = TwinNamespaceLabels(api, consumers, settings.workers)
        mapper = NamespaceMapper(api, settings.cluster_id, consumers,
                                 settings.consumer_cluster_role)
        registry = build_registry(connection, mapper, settings.namespace_map_resync_seconds)
        metrics.gauges["shadowpods_counted"] = (
            "Non-terminal ShadowPods counted against quotas.", lambda: float(len(ledger)))
        controllers: list[Controller[Any]] = [shadowpods.controller, twins.controller,
                                              node_failures.controller]
        metrics.controllers = controllers
        reconciling = [asyncio.create_task(controller.run(), name=f"controller-{controller.name}")
                       for controller in controllers]
        # What the enforcer's own list+watches feed (kopf's per-object machinery costs far more
        # than these handlers do, at thousands of pods; see docs/benchmarks.md).
        feeds: list[tuple[str, str, Sink]] = [
            ("pods", core_path("pods"), fanned_out(offers.on_pod, shadowpods.on_pod_event,
                                                   metrics.pods.on_pod,
                                                   pod_addresses.on_pod, node_failures.on_pod)),
            ("shadowpods", shadowpod_path(""),
             fanned_out(ledger.apply, shadowpods.on_shadowpod_event)),
            ("namespaces", core_path("namespaces"), fanned_out(
                consumers.namespaces.apply, twins.on_namespace, offers.on_namespace,
                shadowpods.on_namespace_event)),
            ("nodes", core_path("nodes"), fanned_out(offers.on_node, node_failures.on_node)),
            ("quotas", custom_path(QUOTA), fanned_out(consumers.quotas.apply, twins.on_quota,
                                                        shadowpods.on_quota_event)),
            # the reflected claims (the origin label): their storage counts against quotas
            ("persistentvolumeclaims", core_path("persistentvolumeclaims"), ledger.apply_claim),
        ]
        listed = {name: asyncio.Event() for name, _, _ in feeds}
        background: list[asyncio.Task[None]] = [asyncio.create_task(list_and_watch(
            api, path, sink, on_listed=listed[name].set, name=name), name=f"watch-{name}")
            for name, path, sink in feeds]

        async def when_listed(names: tuple[str, ...],
                              then: asyncio.Event | Callable[[], Awaitable[None]]) -> None:
            """Set `then`, or run it, once the caches `names` hold their first list."""
            for name in names:
                await listed[name].wait()
            if isinstance(then, asyncio.Event):
                then.set()
            else:
                await then()

        background += [
            asyncio.create_task(when_listed(("namespaces", "quotas"), consumers.listed)),
            asyncio.create_task(when_listed(("shadowpods",), ledger.synced)),
            asyncio.create_task(when_listed(("pods",), pod_addresses.listed)),
            asyncio.create_task(when_listed(("persistentvolumeclaims",),
                                            ledger.claims_synced)),
            asyncio.create_task(when_listed(("pods", "shadowpods"), shadowpods.listed)),
            asyncio.create_task(when_listed(("pods", "shadowpods", "nodes"),
                                            node_failures.listed)),
            # No offer from a half-listed picture (it would under-count what runs).
            asyncio.create_task(when_listed(("pods", "nodes", "namespaces"),
                                            offers.run), name="offer"),
            asyncio.create_task(when_listed(("quotas", "shadowpods"), lambda: write_quota_status(
                api, ledger, consumers.quotas, settings.offer_debounce_seconds)),
                name="quota-status")]
        webhook = await start_webhook(
            admission, metrics, settings.webhook_address, settings.webhook_port, ssl_context,
            ClaimAdmission(api, consumers, ledger, settings.storage_classes),
            ObjectAdmission(api, consumers, pod_addresses))
        health = await serve_probes(settings.health_address, settings.health_port,
                                    ready=ready.is_set, not_ready="starting",
                                    scrape=metrics_handler(metrics.registry(), MetricsAccess(
                                        Reviews(api)) if settings.metrics_secure else None))
        kopf_ready = asyncio.Event()
        if settings.webhook_cert and settings.webhook_key:
            background.append(asyncio.create_task(reload_on_change(
                ssl_context, settings.webhook_cert, settings.webhook_key), name="cert-reload"))

        async def readiness() -> None:
            # Ready once kopf runs and every cache holds its first list.
            await kopf_ready.wait()
            for event in listed.values():
                await event.wait()
            ready.set()
        background.append(asyncio.create_task(readiness(), name="readiness"))
        log.info("enforcer %s: webhook on %s:%d, health on %s:%d", settings.cluster_id,
                 settings.webhook_address, settings.webhook_port, settings.health_address,
                 settings.health_port)
        try:
            await kopf.operator(registry=registry, settings=kopf_settings(settings),
                                standalone=True, clusterwide=True, ready_flag=kopf_ready,
                                stop_flag=stop)
        finally:
            # No new reconcile starts; the ones under way finish before the client closes.
            for controller in controllers:
                controller.stop()
            await asyncio.gather(*reconciling, return_exceptions=True)
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            await webhook.cleanup()
            await health.cleanup()
    finally:
        await api.close()
