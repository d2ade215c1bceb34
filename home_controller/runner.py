"""Wiring: the home cluster's list+watches (ForeignClusters cluster-wide; the consumer
kubeconfig Secrets and VirtualNodes of the controller's namespace) feeding the informer
registry, the discovery sources that are enabled, the ForeignCluster controller (annex's one
runtime: the same keys, sync gates, retries and metrics as the agent's and the enforcer's
controllers), and the health server. A VirtualNode controller (the agents' Deployments) adds its
own Controller and routes to the same registry and client (with `--agent-template`)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from annex.api_paths import group_path
from annex.controller import Controller
from annex.events import EventRecorder
from annex.informers import Informers
from annex.kube import load_connection
from annex.kubeapi import ClusterApi
from annex.leader import LeaderElector
from annex.leader_flags import candidacy
from annex.listwatch import list_and_watch
from annex.metrics import ServedRequests
from annex.probes import serve_probes
from home_controller.agent_admission import AgentAdmission
from home_controller.dns import DnsBrowser
from home_controller.foreign_clusters import HOME, ForeignClusters
from home_controller.mdns import MdnsBrowser
from home_controller.metrics import scrape
from home_controller.namespace_grants import NamespaceGrants
from home_controller.settings import Settings
from home_controller.sightings import Sightings
from home_controller.virtual_nodes import VirtualNodes
from shared.api.virtual_node import VIRTUAL_NODE
from shared.forge.agent import AgentTemplate

log = logging.getLogger(__name__)


def _watches(api: ClusterApi, informers: Informers, namespace: str,
             listers: list[ForeignClusters | VirtualNodes | NamespaceGrants]
             ) -> list[asyncio.Task[Any]]:
    tasks: list[asyncio.Task[Any]] = []
    for by, scope in (("cluster", ""), ("namespace", namespace)):
        for (group, version, plural), selector in informers.watched(HOME, by).items():
            def sink(event_type: str, obj: dict[str, Any], plural: str = plural) -> None:
                informers.dispatch(HOME, plural, event_type, obj)

            def listed(plural: str = plural) -> None:
                for lister in listers:
                    lister.on_listed(plural)

            tasks.append(asyncio.create_task(list_and_watch(
                api, group_path(group, version, plural, scope), sink,
                query={"labelSelector": selector} if selector else None, on_listed=listed,
                name=plural), name=f"watch-{plural}"))
    return tasks


def leader_elector(settings: Settings) -> LeaderElector | None:
    if settings.leader_election is None:
        return None
    return candidacy(settings.leader_election, load_connection(settings.kubeconfig))


async def run(settings: Settings, stop: asyncio.Event | None = None) -> int:
    """Until `stop`: 0; 1 once this replica lost its leadership (it stops writing at once, and
    exits to start again as a standby)."""
    stop = stop if stop is not None else asyncio.Event()
    api = ClusterApi(load_connection(settings.kubeconfig), throttle_reads=False)
    informers = Informers()
    clusters: ForeignClusters
    sightings = Sightings(lambda cluster_id: clusters.controller.add(cluster_id))
    clusters = ForeignClusters(api, informers, sightings, settings.workers)
    controllers: list[Controller[Any]] = [clusters.controller]
    agents = None
    admission = None
    webhook_requests = ServedRequests()
    grants: list[NamespaceGrants] = []
    if settings.agent_template is not None:
        template = AgentTemplate.model_validate_json(Path(settings.agent_template).read_text())
        if template.namespace != settings.namespace:
            # An owner reference never crosses namespaces: the agents live with their VirtualNode.
            raise SystemExit(f"--agent-template makes agents in namespace {template.namespace}, "
                             f"not in --namespace {settings.namespace}")
        agents = VirtualNodes(api, informers, template,
                              EventRecorder(api, "annex-home-controller"),
                              drain_timeout=settings.drain_timeout_seconds,
                              workers=settings.workers)
        controllers.append(agents.controller)
        if settings.webhook_address:
            virtual_nodes, listed = agents.virtual_nodes, agents.listed
            admission = await AgentAdmission(
                api, template, virtual_nodes, lambda: VIRTUAL_NODE.plural in listed,
                webhook_requests, clusters.offers.pools,
            ).serve(settings.webhook_address, settings.webhook_cert, settings.webhook_key)
        if template.namespace_role:
            grants.append(NamespaceGrants(api, informers, template, workers=settings.workers))
            controllers.append(grants[0].controller)
    sources: list[MdnsBrowser | DnsBrowser] = []
    if settings.discover_mdns:
        sources.append(MdnsBrowser(sightings, settings.mdns_interfaces,
                                   settings.mdns_settle_seconds))
    if settings.discover_dns_domains:
        sources.append(DnsBrowser(sightings, settings.discover_dns_domains,
                                  settings.dns_servers, settings.dns_interval_seconds))
    tasks = [*(asyncio.create_task(source.run(), name=type(source).__name__)
               for source in sources),
             *_watches(api, informers, settings.namespace,
                       [clusters, *([agents] if agents is not None else []), *grants])]
    reconciling: list[asyncio.Task[None]] = []

    def lead() -> None:
        reconciling.extend(asyncio.create_task(controller.run(), name=controller.name)
                           for controller in controllers)

    elector = leader_elector(settings)
    election = None
    if elector is None:
        lead()
    else:
        election = elector.campaign(lead, lost=stop.set)

    def role() -> str:
        if elector is None:
            return "ok"
        return "ok: leader" if elector.leading else (
            f"ok: standby (leader: {elector.holder or 'none yet'})")

    health = await serve_probes(
        settings.health_address, settings.health_port,
        ready=lambda: clusters.synced() and (agents is None or agents.synced()) and all(
            grant.synced() for grant in grants),
        not_ready="listing and discovering", ready_text=role,
        scrape=scrape(controllers, api, settings.metrics_secure, [webhook_requests], elector))
    log.info("home controller: namespace %s, discovery %s, agents %s", settings.namespace,
             ", ".join(type(s).__name__ for s in sources) or "off",
             "from VirtualNodes" if agents is not None else "made elsewhere")
    exit_code = 0
    try:
        await stop.wait()
    finally:
        for controller in controllers:
            controller.stop()
        await asyncio.gather(*reconciling, return_exceptions=True)  # what is under way ends
        if election is not None and elector is not None:
            if election.done():
                log.error("leadership lost: stopping every write and exiting (restarted, this "
                          "replica is a standby)")
                exit_code = 1
            election.cancel()
            await asyncio.gather(election, return_exceptions=True)
            await elector.release()  # nothing writes any more: a standby may lead now
            await elector.api.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await clusters.offers.close()
        await health.cleanup()
        if admission is not None:
            await admission.cleanup()
        await api.close()
    return exit_code
