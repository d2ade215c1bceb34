"""The agent's components built from its state, each with exactly what it uses (as Liqo's
provider builds its reflectors with their listers and clients): the pod offloader, the
reflection's reflectors and companions, the virtual node's and the namespaces' reconciles, the
remote watches, the node Lease and health checks, the webhook, the kubelet API, /metrics and
the agent's own routes. This module and the runner are the only ones that take the whole `Agent`
apart for them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from annex.kubeapi import ClusterApi
from annex.mirror import Mirror
from annex.workqueue import KeyQueue
from home_agent.agent import HOME, NODE_KEY, REMOTE, TWINS_KEY, Agent
from home_agent.config import TOKEN_REFLECTION
from home_agent.heartbeat import HealthChecks, NodeLease
from home_agent.kubelet.server import KubeletSources
from home_agent.kubelet.usage import NodePods
from home_agent.metrics import AgentFigures
from home_agent.namespace_map import ConsumerNamespaceMap
from home_agent.namespace_offloading import OffloadingSources
from home_agent.pod import PodOffloader, PodSources
from home_agent.reflection.endpointslice import ENDPOINTSLICE_RULES, EndpointSliceReflector
from home_agent.reflection.event import EventReflector
from home_agent.reflection.kinds import KINDS
from home_agent.reflection.manager import Companion, Reflection
from home_agent.reflection.peering import Peering
from home_agent.reflection.persistentvolumeclaim import (
    PERSISTENTVOLUMECLAIM_RULES,
    PersistentVolumeClaimReflector,
)
from home_agent.reflection.reflector import KindRules, Reflector
from home_agent.reflection.service import SERVICE_RULES
from home_agent.reflection.token import TokenReflector
from home_agent.remote_watch import RemoteWatchSources
from home_agent.routes import AgentRoutes
from home_agent.twins import TwinNamespaces
from home_agent.virtual_node import NodeSources
from home_agent.webhook import WebhookMirrors
from shared.api.builtin import (
    EVENTS,
    PERSISTENTVOLUMECLAIMS,
    PERSISTENTVOLUMES,
    PODS,
    SECRETS,
    SERVICES,
)
from shared.api.shadowpod import SHADOWPOD
from shared.forge.pod_status import StatusForgeConfig
from shared.ipremap import CidrRemap
from shared.reflection_policy import ReflectionType

EVENT_FLAG = "event"
"""`--event-reflection-workers` (the one of `REFLECTED_HOME_KINDS`)."""


def agent_routes(agent: Agent) -> AgentRoutes:
    """What the agent's own routes read and feed."""
    config = agent.config
    return AgentRoutes(
        informers=agent.informers, queue=agent.queue, twins=agent.twins, echoes=agent.echoes,
        offloaded=agent.offloaded, may_be_node=agent.may_be_node,
        tenant_namespace=agent.tenant_namespace, namespace_map_name=agent.namespace_map_name,
        home_cluster_id=config.home_cluster_id, remote_cluster_id=config.remote_cluster_id)


def peering_of(agent: Agent) -> Peering:
    """What every reflector reads and writes through."""
    config = agent.config
    return Peering(
        home=agent.home, remote=agent.remote, home_cluster_id=config.home_cluster_id,
        remote_cluster_id=config.remote_cluster_id, twins=agent.twins, offloaded=agent.offloaded,
        synced=lambda: agent.home_synced.is_set() and agent.remote_synced(),
        namespace_ready=agent.namespace_ready, reflection_config=agent.reflection_config,
        events=agent.events)


def _policy(agent: Agent, flag: str) -> ReflectionType:
    """`--<flag>-reflection-type`."""
    return ReflectionType(agent.config.reflection_types.get(flag, ReflectionType.DENY_LIST))


def kind_reflector(agent: Agent, peering: Peering, rules: KindRules, workers: int) -> Reflector:
    """One kind's reflector, over the kind's mirrors on both sides; the kinds whose decisions
    read more get that too."""
    home = agent.informers.mirror(HOME, rules.plural)
    remote = agent.informers.mirror(REMOTE, rules.plural)
    policy, config = _policy(agent, rules.flag), agent.config
    if rules is ENDPOINTSLICE_RULES:
        return EndpointSliceReflector(
            peering, rules, workers, policy, home, remote,
            services=agent.informers.mirror(HOME, SERVICES.plural),
            service_policy=_policy(agent, SERVICE_RULES.flag),
            remap=(CidrRemap(config.home_pod_cidr, config.remapped_home_pod_cidr)
                   if config.home_pod_cidr and config.remapped_home_pod_cidr else None),
            node_names=agent.node_pools)
    if rules is PERSISTENTVOLUMECLAIM_RULES:
        return PersistentVolumeClaimReflector(
            peering, rules, workers, policy, home, remote,
            volumes=agent.informers.mirror(HOME, PERSISTENTVOLUMES.plural),
            nodes=agent.mirrors.nodes, node_names=agent.node_pools,
            home_storage_class=config.home_storage_class, offer=agent.offer)
    return Reflector(peering, rules, workers, policy, home, remote)


CompanionFactory = Callable[[Agent, Peering, Mapping[str, Reflector]], "Companion | None"]
"""(agent, peering, the enabled kinds' reflectors by plural) → a companion, or None when its
flag disables it."""


def event_reflector(agent: Agent, peering: Peering,
                    reflectors: Mapping[str, Reflector]) -> EventReflector | None:
    """Remote Events back home, unless `--event-reflection-workers 0`."""
    workers = agent.config.reflection_workers.get(EVENT_FLAG, 0)
    if workers <= 0:
        return None
    return EventReflector(peering, reflectors, workers,
                          remote=agent.informers.mirror(REMOTE, EVENTS.plural),
                          selected_namespaces=agent.selected_namespaces)


def token_reflector(agent: Agent, peering: Peering,
                    reflectors: Mapping[str, Reflector]) -> TokenReflector | None:
    """The pods' service-account tokens, unless `--serviceaccount-reflection-workers 0`."""
    workers = agent.config.reflection_workers.get(TOKEN_REFLECTION, 0)
    if workers <= 0:
        return None
    return TokenReflector(peering, workers, pods=agent.mirrors.pods,
                          secrets=agent.informers.written(REMOTE, SECRETS.plural),
                          enable_apiserver_support=agent.config.enable_apiserver_support,
                          refresh_fraction=agent.config.token_refresh_fraction)


COMPANIONS: list[CompanionFactory] = [event_reflector, token_reflector]


def reflection_for(agent: Agent, kinds: Sequence[KindRules] = KINDS,
                   companions: Sequence[CompanionFactory] = ()) -> Reflection:
    """The reflection of `kinds` and `companions` (the agent's: `COMPANIONS`) that the agent's
    flags enable (0 workers disable a kind: it is not even watched)."""
    peering = peering_of(agent)
    reflectors = {rules.plural: kind_reflector(agent, peering, rules, workers)
                  for rules in kinds
                  if (workers := agent.config.reflection_workers.get(rules.flag, 0)) > 0}
    made = (factory(agent, peering, reflectors) for factory in companions)
    return Reflection(reflectors, [companion for companion in made if companion is not None])


def pod_offloader(agent: Agent, reflection: Reflection | None = None) -> PodOffloader:
    """The pod offloader, reading the claims and waiting for the copies of `reflection` (none
    without it: the ShadowPod never waits for copies)."""
    config, informers = agent.config, agent.informers
    claims = reflection.reflectors.get(PERSISTENTVOLUMECLAIM_RULES.plural) if reflection else None
    sources = PodSources(
        pods=informers.written(HOME, PODS.plural),
        shadow_pods=informers.written(REMOTE, SHADOWPOD.plural),
        twins=agent.twins, nodes=agent.mirrors.nodes,
        claims=claims.home if claims is not None else None,
        volumes=informers.mirror(HOME, PERSISTENTVOLUMES.plural),
        token_secrets=informers.written(REMOTE, SECRETS.plural),
        copies=reflection.required if reflection is not None else None,
        node_name=agent.node_name, node_pools=agent.node_pools,
        forge_config=agent.pod_forge_config,
        status_config=StatusForgeConfig(node_ip=config.host_ip, pod_cidr=config.remote_pod_cidr,
                                        remapped_pod_cidr=config.remapped_pod_cidr),
        home_cluster_id=config.home_cluster_id, remote_cluster_id=config.remote_cluster_id,
        tokens_reflected=config.reflects_tokens, webhook_serves=bool(config.webhook_address),
        clock=lambda: asyncio.get_running_loop().time())
    return PodOffloader(sources, agent.home, agent.remote, agent.events, agent.echoes)


def kubelet_sources(agent: Agent) -> KubeletSources:
    """What the kubelet API answers from."""
    mirrors = agent.mirrors
    return KubeletSources(
        node_pods=NodePods(pods=mirrors.pods, shadow_pods=mirrors.shadow_pods, twins=agent.twins),
        node_names=agent.node_pools, listed=agent.home_synced.is_set,
        health=lambda: agent.health,
        remote_cluster_id=agent.config.remote_cluster_id, home=agent.home.live,
        remote=agent.remote.live)


def agent_figures(agent: Agent) -> AgentFigures:
    """What /metrics reads of the agent."""
    return AgentFigures(
        remote_cluster_id=agent.config.remote_cluster_id, node_name=agent.node_name,
        remote_ready=lambda: bool(agent.health.ready), pods=agent.mirrors.pods,
        shadow_pods=agent.mirrors.shadow_pods,
        synced=lambda: agent.home_synced.is_set() and agent.remote_synced(),
        health_checks=agent.health_checks)


def consumer_namespace_map(agent: Agent) -> ConsumerNamespaceMap:
    """Where this consumer's NamespaceMap is."""
    config = agent.config
    return ConsumerNamespaceMap(remote=agent.remote, namespace=agent.tenant_namespace,
                                name=agent.namespace_map_name,
                                home_cluster_id=config.home_cluster_id,
                                remote_cluster_id=config.remote_cluster_id)


def remote_watch_sources(agent: Agent) -> RemoteWatchSources:
    """What the remote watches are started with; the tenant namespace listed, the twins are
    looked at."""
    return RemoteWatchSources(
        informers=agent.informers, side=REMOTE, remote=agent.remote.live,
        tenant_namespace=agent.tenant_namespace, twins=agent.twins,
        namespace_map=consumer_namespace_map(agent), tenant_synced=agent.tenant_synced,
        twins_synced=agent.twins_synced, tenant_listed=lambda: agent.enqueue(TWINS_KEY))


@dataclass(frozen=True)
class Listings:
    """Whether the mirrors a key's reconcile reads are listed (`home_agent.runner`): the home
    ones, the tenant namespace's, both remote watches', one home namespace's objects."""

    home: Callable[[], bool]
    tenant: Callable[[], bool]
    remote: Callable[[], bool]
    namespace: Callable[[str], bool]


@dataclass(frozen=True)
class AgentKeys:
    """What the agent's own keys are reconciled with (`home_agent.runner`): their queue and
    workers, the node's, the offloadings' and the pods' reconciles, the namespaces selected,
    when a key's mirrors are listed, and what names a key's object and trace."""

    queue: KeyQueue
    workers: int
    node: NodeSources
    offloadings: OffloadingSources
    pods: PodOffloader
    selected_namespaces: Callable[[], frozenset[str]]
    listings: Listings
    node_name: Callable[[], str]
    twins: TwinNamespaces
    shadow_pods: Mirror


def agent_keys(agent: Agent, kubelet_ports: Callable[[Collection[str]], Mapping[str, int]],
               reflection: Reflection | None = None) -> AgentKeys:
    """The agent's own keys, the pods' reading `reflection` (`pod_offloader`), the nodes
    advertising the kubelet API ports `kubelet_ports` gives (`KubeletServer.ports`)."""
    config, mirrors = agent.config, agent.mirrors
    node = NodeSources(
        home=agent.home, nodes=mirrors.nodes, pods=mirrors.pods,
        virtual_node=agent.virtual_node, events=agent.events,
        node_name=agent.node_name, offer=agent.offer, offer_known=agent.tenant_synced.is_set,
        health=lambda: agent.health,
        retry_after=lambda seconds: agent.queue.add_after(NODE_KEY, seconds),
        remote_cluster_id=config.remote_cluster_id, agent_ip=config.agent_ip,
        kubelet_ports=kubelet_ports)
    offloadings = OffloadingSources(
        home=agent.home, offloadings=mirrors.offloadings,
        remote_claims=agent.informers.mirror(REMOTE, PERSISTENTVOLUMECLAIMS.plural),
        twins=agent.twins, namespace_map=consumer_namespace_map(agent),
        virtual_node=agent.virtual_node, node_name=agent.node_name, offer=agent.offer,
        events=agent.events, home_cluster_id=config.home_cluster_id,
        remote_cluster_id=config.remote_cluster_id)
    return AgentKeys(
        queue=agent.queue, workers=config.workers, node=node, offloadings=offloadings,
        pods=pod_offloader(agent, reflection),
        selected_namespaces=agent.selected_namespaces,
        listings=Listings(home=agent.home_synced.is_set, tenant=agent.tenant_synced.is_set,
                          remote=agent.remote_synced, namespace=agent.namespace_ready),
        node_name=agent.node_name, twins=agent.twins, shadow_pods=mirrors.shadow_pods)


@dataclass(frozen=True)
class AgentParts:
    """What the runner runs beside the watches, the reflection and the credentials: the agent's
    own keys, the node Lease, the health checks, what the webhook, /metrics and the kubelet
    API answer from, and both clients (closed last)."""

    keys: AgentKeys
    lease: NodeLease
    health_checks: HealthChecks
    webhook: WebhookMirrors
    figures: AgentFigures
    kubelet: KubeletSources
    home: ClusterApi
    remote: ClusterApi


def agent_parts(agent: Agent, reflection: Reflection,
                kubelet_ports: Callable[[Collection[str]], Mapping[str, int]]) -> AgentParts:
    config, mirrors = agent.config, agent.mirrors
    return AgentParts(
        keys=agent_keys(agent, kubelet_ports, reflection),
        lease=NodeLease(home=agent.home, nodes=mirrors.nodes, node_names=agent.node_pools,
                        duration_seconds=config.lease_duration_seconds,
                        renew_interval=config.lease_renew_interval),
        health_checks=HealthChecks(remote=agent.remote, durations=agent.health_checks,
                                   report=agent.set_health, interval=config.health_check_interval,
                                   timeout=config.health_check_timeout,
                                   failure_threshold=config.failure_threshold),
        webhook=WebhookMirrors(offloadings=mirrors.offloadings, nodes=mirrors.nodes,
                               virtual_nodes=mirrors.virtual_nodes),
        figures=agent_figures(agent), kubelet=kubelet_sources(agent), home=agent.home,
        remote=agent.remote)
