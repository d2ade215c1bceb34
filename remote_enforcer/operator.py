"""Wiring: the enforcer's watches, declared in its informer registry (`remote_enforcer.routes`),
feed the mirrors and the routes to its controllers (annex.controller: ShadowPods, twin namespace
labels, NamespaceMaps, offers, Quota status, node failures); the admission webhooks and the
health server.

With `--leader-elect`, every replica watches, fills its mirrors and serves the webhooks and
probes; the controllers run on the holder of the election Lease only (a standby's keys wait in
their queues, and are reconciled once it leads), which also decides every quota
(`remote_enforcer.leadership`). A replica that loses the Lease stops writing and exits, to start
again as a standby; one stopped (SIGTERM) stops deciding and writing, lets what it admitted
reach its ledger, then releases the Lease for a standby to take at its next try. The Lease is
owned by the enforcer's ServiceAccount (read from its token): it goes with the release. The
leader is the one that announces the cluster on mDNS (`--announce-mdns`): replicas announcing
one name would conflict, and a standby's announcement would end with it."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Callable
from typing import Any

from annex.api_paths import group_path
from annex.controller import Controller
from annex.informers import Informers
from annex.kube import ClientLimits, load_connection
from annex.kubeapi import ClusterApi
from annex.leader import LeaderElector
from annex.leader_flags import candidacy
from annex.listwatch import list_and_watch
from annex.metrics import MetricsAccess, leader_collector, metrics_handler
from annex.mirror import Mirror
from annex.probes import serve_probes
from annex.reviews import Reviews
from remote_enforcer.admission import Admission, start_webhook
from remote_enforcer.announce import announced
from remote_enforcer.certs import reload_on_change, server_context
from remote_enforcer.claim_admission import ClaimAdmission
from remote_enforcer.consumers import Consumers
from remote_enforcer.leadership import (
    LEADER_WEBHOOK_ANNOTATION,
    Leadership,
    PeerTLS,
    webhook_url,
)
from remote_enforcer.ledger import UsageLedger
from remote_enforcer.metrics import Metrics
from remote_enforcer.namespaces import NamespaceMapper, NamespaceMaps, TwinNamespaceLabels
from remote_enforcer.node_failure import NodeFailures
from remote_enforcer.object_admission import ObjectAdmission, PodAddresses
from remote_enforcer.offer import OfferPublisher
from remote_enforcer.quota_status import QuotaStatus
from remote_enforcer.routes import CLUSTER, WATCH, Parts, declare_routes, declare_watches
from remote_enforcer.settings import Settings
from remote_enforcer.shadowpods import ShadowPodEnforcer

log = logging.getLogger(__name__)


def build(api: ClusterApi, settings: Settings, informers: Informers, metrics: Metrics
          ) -> Parts:
    """Every part, on the registry's mirrors, and the routes that feed them."""
    declare_watches(informers)

    def mirror(resource: str) -> Mirror:
        return informers.mirror(CLUSTER, resource)

    ledger = UsageLedger()
    consumers = Consumers(settings.cluster_id, mirror("namespaces"), mirror("quotas"))
    shadowpods = ShadowPodEnforcer(api, metrics, consumers, settings.workers, mirror("pods"),
                                   mirror("shadowpods"), pools=settings.offer_pools)
    offers = OfferPublisher(api, settings, mirror("nodes"), consumers.lent_pools)
    consumers.offered = offers.offered  # admission limits what a Quota does not list by it
    mapper = NamespaceMapper(api, settings.cluster_id, consumers,
                             settings.consumer_cluster_role)
    parts = Parts(
        consumers=consumers, ledger=ledger, metrics=metrics, shadowpods=shadowpods,
        node_failures=NodeFailures(api, mirror("nodes"), mirror("pods"), mirror("shadowpods"),
                                   shadowpods.events, settings.node_failure_grace_seconds),
        offers=offers, twins=TwinNamespaceLabels(api, consumers, settings.workers),
        namespace_maps=NamespaceMaps(mapper, mirror("namespacemaps"), settings.workers),
        quota_status=QuotaStatus(api, ledger, mirror("quotas"), settings.offer_debounce_seconds,
                                 shadowpods.events, settings.offer_pools),
        pod_addresses=PodAddresses())
    declare_routes(informers, parts)
    metrics.gauges["shadowpods_counted"] = (
        "Non-terminal ShadowPods counted against quotas.", lambda: float(len(ledger)))
    return parts


LISTED_FIRST: dict[str, tuple[str, ...]] = {
    "consumers": ("namespaces", "quotas"),
    "ledger": ("shadowpods",),
    "claims": ("persistentvolumeclaims",),
    "pod_addresses": ("pods",),
    "shadowpods": ("pods", "shadowpods"),
    "node_failures": ("pods", "shadowpods", "nodes"),
    # no offer from a half-listed picture (it would under-count what runs)
    "offers": ("pods", "nodes", "namespaces"),
    "namespace_maps": ("namespacemaps",),
}
"""What each part waits for before it decides anything: the first lists of these resources."""


def listed_events(parts: Parts) -> dict[str, asyncio.Event]:
    return {"consumers": parts.consumers.listed, "ledger": parts.ledger.synced,
            "claims": parts.ledger.claims_synced, "pod_addresses": parts.pod_addresses.listed,
            "shadowpods": parts.shadowpods.listed, "node_failures": parts.node_failures.listed,
            "offers": parts.offers.listed, "namespace_maps": parts.namespace_maps.listed}


def controllers(parts: Parts) -> list[Controller[Any]]:
    return [parts.shadowpods.controller, parts.twins.controller,
            parts.namespace_maps.controller, parts.offers.controller,
            parts.quota_status.controller, parts.node_failures.controller]


def dispatcher(informers: Informers, plural: str) -> Callable[[str, dict[str, Any]], None]:
    """The sink of a resource's list+watch: into the registry."""
    def dispatch(event_type: str, obj: dict[str, Any]) -> None:
        informers.dispatch(CLUSTER, plural, event_type, obj)
    return dispatch


def watch_tasks(api: ClusterApi, informers: Informers, parts: Parts) -> list[asyncio.Task[None]]:
    """A list+watch per declared resource into the registry, and once the resources each part
    reads hold their first list, its event set."""
    listed: dict[str, asyncio.Event] = {}
    tasks: list[asyncio.Task[None]] = []
    for (group, version, plural), selector in informers.watched(CLUSTER, WATCH).items():
        listed[plural] = asyncio.Event()
        tasks.append(asyncio.create_task(list_and_watch(
            api, group_path(group, version, plural), dispatcher(informers, plural),
            query={"labelSelector": selector} if selector else None,
            on_listed=listed[plural].set, name=plural), name=f"watch-{plural}"))

    async def when_listed(resources: tuple[str, ...], then: asyncio.Event) -> None:
        for resource in resources:
            await listed[resource].wait()
        then.set()

    events = listed_events(parts)
    tasks += [asyncio.create_task(when_listed(LISTED_FIRST[part], event))
              for part, event in events.items()]
    return tasks


HANDOVER_SECONDS = 2.0
"""How long a stopping leader waits for what it admitted to reach its ledger (it is stored in
milliseconds, unless the API server refused it after admission) before it gives the Lease up:
the next leader's ledger then counts it."""


def leader_elector(settings: Settings, limits: ClientLimits) -> LeaderElector | None:
    """The candidacy for the election Lease, publishing where this replica's webhook is."""
    if settings.leader_election is None:
        return None
    assert settings.webhook_advertise_address
    return candidacy(settings.leader_election,
                     load_connection(settings.kubeconfig, limits=limits),
                     annotations={LEADER_WEBHOOK_ANNOTATION: webhook_url(
                         settings.webhook_advertise_address, settings.webhook_port)})


async def run(settings: Settings, stop: asyncio.Event | None = None) -> int:
    """Until SIGTERM or SIGINT (or `stop`): 0; 1 once this replica lost its leadership; 2 when
    it cannot start."""
    peers = PeerTLS(settings.webhook_cert) if (
        settings.leader_election is not None and settings.webhook_cert) else None
    if peers is not None and not peers.ca.exists():
        log.error("--leader-elect needs ca.crt beside %s: the replicas verify each other's "
                  "webhook with it", peers.cert)
        return 2
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    limits = ClientLimits(qps=settings.qps, burst=settings.burst)
    connection = load_connection(settings.kubeconfig, limits=limits)
    ssl_context = server_context(settings.webhook_cert, settings.webhook_key,
                                 settings.webhook_hosts, settings.webhook_cert_dir)
    elector = leader_elector(settings, limits)
    # Reads are watches (and a few live reads that guard writes): unthrottled; writes are paced.
    api = ClusterApi(connection, throttle_reads=False)
    exit_code = 0
    try:
        metrics = Metrics()
        informers = Informers()
        parts = build(api, settings, informers, metrics)
        running = controllers(parts)
        metrics.controllers = running
        leadership = Leadership(
            elector, peers, lambda result: metrics.count("admissions_forwarded_total", (result,)))
        background = watch_tasks(api, informers, parts)
        reconciling: list[asyncio.Task[None]] = []

        def lead() -> None:
            reconciling.extend(asyncio.create_task(controller.run(),
                                                   name=f"controller-{controller.name}")
                               for controller in running)
            reconciling.append(asyncio.create_task(announcing(settings), name="announce"))

        election: asyncio.Task[None] | None = None
        if elector is None:
            lead()
        else:
            metrics.extra.append(leader_collector(lambda: elector.name, leadership.deciding,
                                                  lambda: elector.transitions))
            election = elector.campaign(lead, lost=stop.set)
        admission = Admission(api, parts.ledger, parts.consumers, leadership,
                              pools=settings.offer_pools)
        claims = ClaimAdmission(api, parts.consumers, parts.ledger, settings.storage_classes,
                                leadership)
        webhook = await start_webhook(
            admission, metrics, settings.webhook_address, settings.webhook_port, ssl_context,
            claims, ObjectAdmission(api, parts.consumers, parts.pod_addresses))
        ready = all_set(list(listed_events(parts).values()))

        def role() -> str:
            if elector is None or leadership.deciding():
                return "ok: leader" if elector is not None else "ok"
            return f"ok: standby (leader: {elector.holder or 'none yet'})"

        health = await serve_probes(settings.health_address, settings.health_port,
                                    ready=ready, not_ready="starting", ready_text=role,
                                    scrape=metrics_handler(metrics.registry(), MetricsAccess(
                                        Reviews(api)) if settings.metrics_secure else None))
        if settings.webhook_cert and settings.webhook_key:
            background.append(asyncio.create_task(reload_on_change(
                ssl_context, settings.webhook_cert, settings.webhook_key), name="cert-reload"))
        log.info("enforcer %s: webhook on %s:%d, health on %s:%d", settings.cluster_id,
                 settings.webhook_address, settings.webhook_port, settings.health_address,
                 settings.health_port)
        try:
            await stop.wait()
        finally:
            # Nothing is decided nor written from now on; the reconciles under way finish
            # before the client closes.
            leadership.stop_deciding()
            for controller in running:
                controller.stop()
            await cancelled([task for task in reconciling if task.get_name() == "announce"])
            await asyncio.gather(*reconciling, return_exceptions=True)
            if election is not None and elector is not None:
                if election.done():
                    log.error("leadership lost: stopping every write and exiting (restarted, "
                              "this replica is a standby)")
                    exit_code = 1
                leading = elector.leading
                await cancelled([election])
                if leading:
                    await handed_over(admission, claims)
                await elector.release()  # a standby may lead now
                await elector.api.close()
            await cancelled(background)
            await webhook.cleanup()
            await health.cleanup()
            await leadership.close()
    finally:
        await api.close()
    return exit_code


async def announcing(settings: Settings) -> None:
    """The cluster announced on mDNS (with --announce-mdns) until cancelled: the goodbye then."""
    async with announced(settings):
        await asyncio.Event().wait()


async def handed_over(admission: Admission, claims: ClaimAdmission) -> None:
    """Wait, at most HANDOVER_SECONDS, until the ledger counts what this leader admitted."""
    deadline = time.monotonic() + HANDOVER_SECONDS
    while admission.reserved() + claims.reserved() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


def all_set(events: list[asyncio.Event]) -> Callable[[], bool]:
    return lambda: all(event.is_set() for event in events)


async def cancelled(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)

