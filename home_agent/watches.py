"""Where every watch event goes, declared in one place (the agent's informer registry,
`annex.informers`): per resource and side, which mirror holds it and which keyers feed which
controller. The registry applies an event to the mirror before any route, so a keyer reads
every mirror as it is after the event.

The agent's own keys (`agent.queue`): the node, the twins watch, one namespace's offloading,
one pod.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Iterator

from annex.informers import Change
from home_agent.agent import (
    HOME,
    NODE_KEY,
    REMOTE,
    TWINS_KEY,
    Agent,
    offloading_key,
    pod_key,
)
from shared.api.namespace_map import NamespaceMap

log = logging.getLogger(__name__)


# --- the agent's keyers ----------------------------------------------------------------------


def namespace_keys(agent: Agent, namespace: str) -> Iterator[Hashable]:
    """Everything that reads a namespace's offloading: the namespace and its pods (home, and
    those known by their ShadowPod only)."""
    yield offloading_key(namespace)
    for pod_namespace, name in agent.mirrors.pods.keys():
        if pod_namespace == namespace:
            yield pod_key(pod_namespace, name)
    remote_namespace = agent.mapped_remote_namespace(namespace)
    for shadow_namespace, name in agent.mirrors.shadow_pods.keys():
        if shadow_namespace == remote_namespace:
            yield pod_key(namespace, name)


def every_key(agent: Agent) -> Iterator[Hashable]:
    yield NODE_KEY
    for namespace, _ in agent.mirrors.offloadings.keys():
        yield offloading_key(namespace)
    for namespace, name in agent.mirrors.pods.keys():
        yield pod_key(namespace, name)


def node_keys(agent: Agent, change: Change) -> Iterator[Hashable]:
    log.debug("node event %s %s", change.event_type, change.key)
    if change.key[1] == agent.node_name():
        yield NODE_KEY


def virtual_node_keys(agent: Agent, change: Change) -> Iterator[Hashable]:
    """This agent's VirtualNode configures the node, the offloadings and the pods."""
    if (change.obj.get("spec") or {}).get("clusterId") == agent.config.remote_cluster_id:
        yield from every_key(agent)


def shadow_pod_keys(agent: Agent, change: Change) -> Iterator[Hashable]:
    home_namespace = agent.home_namespace_of(change.key[0])
    if home_namespace is not None:
        yield pod_key(home_namespace, change.key[1])


def offer_keys(agent: Agent, change: Change) -> Iterator[Hashable]:
    # Only the node reads the offer (capacity, labels); the provider republishes it as its
    # usage changes, which must not requeue every pod.
    if change.key[0] == agent.tenant_namespace:
        yield NODE_KEY


def namespace_map_keys(agent: Agent, change: Change) -> Iterator[Hashable]:
    """The namespaces the mapping touched, before or after, and the twins watch."""
    if change.key != (agent.tenant_namespace, agent.namespace_map_name):
        return
    touched: set[str] = set()
    before = NamespaceMap.model_validate(change.before) if change.before else None
    for namespace_map in (before, agent.namespace_map()):
        if namespace_map is not None:
            touched |= set(namespace_map.spec.desired_mapping)
            touched |= set(namespace_map.status.current_mapping)
    for namespace in touched:
        yield from namespace_keys(agent, namespace)
    yield TWINS_KEY


def declare_agent(agent: Agent) -> None:
    """The agent's own resources, mirrors (`agent.mirrors`) and keys."""
    informers, queue = agent.informers, agent.queue
    for side, resource in ((HOME, "pods"), (HOME, "nodes"), (HOME, "virtualnodes"),
                           (HOME, "namespaceoffloadings"), (REMOTE, "shadowpods"),
                           (REMOTE, "resourceoffers"), (REMOTE, "namespacemaps")):
        informers.watch(side, resource)
    # The watch selects the pods bound to the virtual node.
    informers.keys(HOME, "pods", lambda change: [pod_key(*change.key)], queue)
    informers.keys(HOME, "nodes", lambda change: node_keys(agent, change), queue)
    informers.keys(HOME, "virtualnodes", lambda change: virtual_node_keys(agent, change), queue)
    informers.keys(HOME, "namespaceoffloadings",
                   lambda change: namespace_keys(agent, change.key[0]), queue)
    informers.keys(REMOTE, "shadowpods", lambda change: shadow_pod_keys(agent, change), queue)
    informers.keys(REMOTE, "resourceoffers", lambda change: offer_keys(agent, change), queue)
    informers.keys(REMOTE, "namespacemaps", lambda change: namespace_map_keys(agent, change),
                   queue, compares=True)
