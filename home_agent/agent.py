"""The agent's shared state: configuration, both clusters' clients, the watched objects of both
sides and the work queue (what feeds them is declared in `home_agent.routes`).

Reconciles are level-triggered: a key names what to converge (the virtual node, one namespace's
offloading, one pod), and its reconcile recomputes the desired state from both mirrors.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from pydantic import ValidationError

from annex.events import EventRecorder
from annex.informers import Echoes, Informers
from annex.kubeapi import ClusterApi
from annex.metrics_histogram import DEFAULT_BUCKETS, Histogram
from annex.mirror import Mirror
from annex.workqueue import KeyQueue
from home_agent.config import AgentConfig
from home_agent.offloaded_namespaces import OffloadedNamespaces
from home_agent.twins import TwinNamespaces
from shared.api.builtin import NODES, PODS
from shared.api.namespace_map import NAMESPACE_MAP
from shared.api.namespace_offloading import NAMESPACE_OFFLOADING, NAMESPACE_OFFLOADING_NAME
from shared.api.resource_offer import RESOURCE_OFFER, ResourceOffer
from shared.api.shadowpod import SHADOWPOD
from shared.api.virtual_node import VIRTUAL_NODE, VirtualNode
from shared.forge.agent import NEVER_GRANTED_NAMESPACES
from shared.forge.metadata import ReflectionConfig, reflection_config
from shared.forge.node import agent_nodes, labels_by_name, served_nodes
from shared.forge.node_status import Health
from shared.forge.pod import PodForgeConfig
from shared.node_selector import selects_a_node
from shared.wellknown import HOME_AGENT_COMPONENT, VIRTUAL_NODE_NAME_PREFIX

log = logging.getLogger(__name__)

T = TypeVar("T")

HOME, REMOTE = "home", "remote"
"""The sides of the informer registry."""

NODE_KEY: tuple[str] = ("node",)
TWINS_KEY: tuple[str] = ("twins",)
"""Keeps the ShadowPod watch on the accepted twin namespaces."""
NAMESPACES_KEY: tuple[str] = ("namespaces",)
"""Keeps the home watches on the namespaces this agent offloads (`Agent.selected_namespaces`)."""


def offloading_key(namespace: str) -> tuple[str, str]:
    return ("offloading", namespace)


def pod_key(namespace: str, name: str) -> tuple[str, str, str]:
    return ("pod", namespace, name)


@dataclass(frozen=True)
class Mirrors:
    """The agent's own mirrors, held by its informer registry (`home_agent.routes` declares
    what feeds them)."""

    # home
    pods: Mirror
    """Only the pods bound to this agent's virtual node."""
    nodes: Mirror
    virtual_nodes: Mirror
    offloadings: Mirror
    # remote
    shadow_pods: Mirror
    namespace_maps: Mirror
    offers: Mirror

    @classmethod
    def of(cls, informers: Informers) -> Mirrors:
        return cls(pods=informers.mirror(HOME, PODS.plural),
                   nodes=informers.mirror(HOME, NODES.plural),
                   virtual_nodes=informers.mirror(HOME, VIRTUAL_NODE.plural),
                   offloadings=informers.mirror(HOME, NAMESPACE_OFFLOADING.plural),
                   shadow_pods=informers.mirror(REMOTE, SHADOWPOD.plural),
                   namespace_maps=informers.mirror(REMOTE, NAMESPACE_MAP.plural),
                   offers=informers.mirror(REMOTE, RESOURCE_OFFER.plural))


class Agent:
    def __init__(self, config: AgentConfig, home: ClusterApi, remote: ClusterApi) -> None:
        self.config = config
        self.home = home
        self.remote = remote
        self.queue = KeyQueue()
        self.informers = Informers()
        """Every watched resource's mirror and routes (`home_agent.routes`)."""
        self.mirrors = Mirrors.of(self.informers)
        self.twins = TwinNamespaces(self.mirrors.namespace_maps,
                                    config.effective_tenant_namespace, config.home_cluster_id)
        """This consumer's twin namespaces, as its NamespaceMap says them."""
        self.events = EventRecorder(home, HOME_AGENT_COMPONENT, config.home_cluster_id)
        """The agent's one recorder at home: one bounded correlation of what it posted."""
        self.health = Health(ready=None, message="")
        self.health_checks = Histogram(DEFAULT_BUCKETS)
        """How long the remote's health checks took (`home_agent.heartbeat`)."""
        self.home_synced = threading.Event()
        self.tenant_synced = threading.Event()
        self.twins_synced = threading.Event()
        self._derived: dict[str, tuple[int, Any]] = {}
        """What is parsed from a mirror, with the mirror version it was parsed at."""
        self.echoes = Echoes()
        """By (side, namespace, name): the pods' status and ShadowPods' creation
        (`home_agent.pod`)."""
        self.offloaded = OffloadedNamespaces()
        """The namespaces whose objects are watched at home (`home_agent.watches`)."""
        self._selected: tuple[tuple[int, ...], frozenset[str]] = ((), frozenset())
        self._node_pools: tuple[tuple[int, ...], dict[str, str | None]] = ((), {})

    def remote_synced(self) -> bool:
        """Both remote watches have listed everything (the twins' for the current set)."""
        return self.tenant_synced.is_set() and self.twins_synced.is_set()

    # --- views over the mirrors -------------------------------------------------------------

    @property
    def tenant_namespace(self) -> str:
        return self.config.effective_tenant_namespace

    @property
    def namespace_map_name(self) -> str:
        """The NamespaceMap this agent writes in the tenant namespace: one per consumer."""
        return self.config.home_cluster_id

    def _parsed(self, name: str, mirror: Mirror, parse: Callable[[], T]) -> T:
        """`parse()`, once per change of `mirror`: the VirtualNode is read several times by
        every reconcile. The version is read before the mirror, so a result parsed from an older
        mirror is never used."""
        version = mirror.version
        cached = self._derived.get(name)
        if cached is not None and cached[0] == version:
            return cast(T, cached[1])
        value = parse()
        self._derived[name] = (version, value)
        return value

    def virtual_node(self) -> VirtualNode | None:
        """The VirtualNode resource configuring this agent (the oldest, if several)."""
        return self._parsed("virtual_node", self.mirrors.virtual_nodes,
                            self._parse_virtual_node)

    def reflection_config(self) -> ReflectionConfig:
        """The skip lists as they are now: the flags merged with the VirtualNode's. Built again
        only when the VirtualNode changes: every reflection reconcile reads them."""
        return self._parsed("reflection_config", self.mirrors.virtual_nodes,
                            self._build_reflection_config)

    def pod_forge_config(self) -> PodForgeConfig:
        """How pods are forged now: the flags and the VirtualNode's offloadingPatch. Built again
        only when the VirtualNode changes: every pod reconcile reads it."""
        return self._parsed("pod_forge_config", self.mirrors.virtual_nodes,
                            self._build_pod_forge_config)

    def _build_pod_forge_config(self) -> PodForgeConfig:
        config, virtual_node = self.config, self.virtual_node()
        return PodForgeConfig(
            reflection=self.reflection_config(),
            home_apiserver_host=config.home_apiserver_host,
            home_apiserver_port=config.home_apiserver_port,
            enable_apiserver_support=config.enable_apiserver_support,
            offloading_patch=virtual_node.spec.offloading_patch if virtual_node else None)

    def _build_reflection_config(self) -> ReflectionConfig:
        config, virtual_node = self.config, self.virtual_node()
        return reflection_config(
            config.home_cluster_id, config.remote_cluster_id,
            labels_not_reflected=config.labels_not_reflected,
            annotations_not_reflected=config.annotations_not_reflected,
            offloading_patch=virtual_node.spec.offloading_patch if virtual_node else None)

    def _parse_virtual_node(self) -> VirtualNode | None:
        candidates = []
        for obj in self.mirrors.virtual_nodes.values():
            if (obj.get("spec") or {}).get("clusterId") != self.config.remote_cluster_id:
                continue
            try:
                candidates.append(VirtualNode.model_validate(obj))
            except ValidationError as error:
                log.warning("ignoring invalid VirtualNode: %s", error)
        candidates.sort(key=lambda vn: (str(vn.metadata.creation_timestamp or ""),
                                        vn.metadata.namespace or "", vn.metadata.name or ""))
        return candidates[0] if candidates else None

    def node_name(self) -> str:
        virtual_node = self.virtual_node()
        if virtual_node is not None and virtual_node.spec.node_name:
            return virtual_node.spec.node_name
        return self.config.node_name or (
            f"{VIRTUAL_NODE_NAME_PREFIX}{self.config.remote_cluster_id}")

    def node_pools(self) -> dict[str, str | None]:
        """The agent's Nodes, name → pool (None: the provider shown as one node): those the
        offer makes, and those of the cluster it no longer makes (cordoned until no pod is
        bound there). Computed again only when the Nodes, the VirtualNodes or the offer
        change: every pod asks it."""
        versions = (self.mirrors.nodes.version, self.mirrors.virtual_nodes.version,
                    self.mirrors.offers.version)
        if self._node_pools[0] != versions:
            base = self.node_name()
            existing = agent_nodes(base, self.config.remote_cluster_id,
                                   labels_by_name(self.mirrors.nodes.values()))
            offered, withdrawn = served_nodes(base, self.offer(), existing)
            self._node_pools = (versions, {**withdrawn, **offered})
        return self._node_pools[1]

    def may_be_node(self, name: str) -> bool:
        """Whether a Node of that name may be one of the agent's (its node name, or a pool's
        `<node name>-<pool>`): a change of it may change `node_pools`."""
        base = self.node_name()
        return name == base or name.startswith(f"{base}-")

    def offer(self) -> ResourceOffer | None:
        for obj in self.mirrors.offers.values():
            spec = obj.get("spec") or {}
            if (spec.get("consumerClusterId") == self.config.home_cluster_id
                    and spec.get("clusterId") == self.config.remote_cluster_id):
                try:
                    return ResourceOffer.model_validate(obj)
                except ValidationError as error:
                    log.warning("ignoring invalid ResourceOffer: %s", error)
        return None

    def namespace_ready(self, namespace: str) -> bool:
        """Whether `namespace`'s objects can be decided on: it is not offloaded here (this agent
        reflects nothing there), or its home objects are listed. A namespace offloaded here but
        not listed yet (its watch starting, its reads not granted yet) holds its keys back: a
        pod waiting for copies would see none."""
        return (self.offloaded.is_listed(namespace)
                or namespace not in self.selected_namespaces())

    def selected_namespaces(self) -> frozenset[str]:
        """The home namespaces this agent offloads: those holding a NamespaceOffloading whose
        clusterSelector selects its virtual node as the Node is labelled (the home controller
        grants their reads to the agents it selects by the same rule,
        `shared.forge.agent.serving_accounts`), the system namespaces and the release's own
        never (nobody grants them). Computed again only when those mirrors change: every key
        asks it."""
        versions = (self.mirrors.offloadings.version, self.mirrors.nodes.version,
                    self.mirrors.virtual_nodes.version)
        if self._selected[0] != versions:
            self._selected = (versions, self._select_namespaces())
        return self._selected[1]

    def _select_namespaces(self) -> frozenset[str]:
        nodes = self.node_labels()
        never = NEVER_GRANTED_NAMESPACES | (
            {self.config.leader_election.namespace} if self.config.leader_election else set())
        selected = set()
        for namespace, name in self.mirrors.offloadings.keys():
            obj = self.mirrors.offloadings.get((namespace, name))
            if (name == NAMESPACE_OFFLOADING_NAME and obj is not None and namespace not in never
                    and selects_a_node((obj.get("spec") or {}).get("clusterSelector"), nodes)):
                selected.add(namespace)
        return frozenset(selected)

    def node_labels(self) -> dict[str, dict[str, str]]:
        """Each of the agent's Nodes (`node_pools`) with its labels as the cluster has them ({}
        for a node not registered yet)."""
        labels = {}
        for name in self.node_pools():
            node = self.mirrors.nodes.get(("", name))
            labels[name] = dict(((node or {}).get("metadata") or {}).get("labels") or {})
        return labels

    def enqueue(self, key: Hashable) -> None:
        self.queue.add(key)

    def set_health(self, health: Health) -> None:
        if health.ready != self.health.ready or (
                not health.ready and health.message != self.health.message):
            self.health = health
            self.enqueue(NODE_KEY)

