"""What the agent watches and where every watch event goes, declared in one place (the
agent's informer registry, `annex.informers`): per resource and side, which watch lists it,
which mirror holds it and which keyers feed which controller. The registry applies an event to
the mirror before any route, so a keyer reads every mirror as it is after the event.

The agent's own keys: the node, the twins watch, the home namespaces watched, one namespace's
offloading, one pod. Then resource reflection's: each kind's reflector, the companions (remote
Events home, the pods' tokens), the resyncs. Each keyer is given what it reads.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any

from annex.informers import Change, Echoes, Informers
from annex.mirror import Mirror
from annex.workqueue import KeyQueue
from home_agent.agent import (
    HOME,
    NAMESPACES_KEY,
    NODE_KEY,
    REMOTE,
    TWINS_KEY,
    offloading_key,
    pod_key,
)
from home_agent.offloaded_namespaces import OffloadedNamespaces
from home_agent.reflection.endpointslice import EndpointSliceReflector
from home_agent.reflection.event import EventReflector
from home_agent.reflection.manager import Reflection
from home_agent.reflection.persistentvolumeclaim import PersistentVolumeClaimReflector
from home_agent.reflection.reflector import Reflector
from home_agent.reflection.token import TokenReflector
from home_agent.twins import TwinNamespaces
from home_agent.watches import (
    HOME_WATCH,
    NODE_PODS_WATCH,
    OFFLOADED_WATCH,
    TENANT_WATCH,
    TWINS_WATCH,
)
from shared.api.builtin import (
    ENDPOINTSLICES,
    EVENTS,
    NODES,
    PERSISTENTVOLUMECLAIMS,
    PERSISTENTVOLUMES,
    PODS,
    SECRETS,
    SERVICES,
)
from shared.api.namespace_map import NAMESPACE_MAP, NamespaceMap
from shared.api.namespace_offloading import NAMESPACE_OFFLOADING
from shared.api.resource_offer import RESOURCE_OFFER
from shared.api.shadowpod import SHADOWPOD
from shared.api.virtual_node import VIRTUAL_NODE
from shared.forge.event import remote_event_kept
from shared.forge.token import is_token_secret, token_secret_pod_name
from shared.ownership import ownership_selector

log = logging.getLogger(__name__)

UNBLOCKED = 1
"""The priority of a pod's key when its token Secret was made (`annex.workqueue`): its ShadowPod
may be created. That finishes work started (the token is made), so it goes before pods still to
look at."""
REPORTED = 2
"""The priority of a pod's key when its ShadowPod changed: a status to copy home, a deletion to
finish. That finishes work in flight, so it goes before everything else: during a burst of new
pods each pod runs at home as soon as it runs remotely, instead of its status waiting behind the
creations that the token Secrets unblock (with the token reflection's workers as fast as the
pods', those are a lane of tens of thousands at N = 50,000)."""


# --- the agent's keyers ----------------------------------------------------------------------


@dataclass(frozen=True)
class AgentRoutes:
    """What the agent's own routes read and feed (built by `home_agent.assembly.agent_routes`):
    the informer registry (its mirrors), the agent's keys' queue, the twin namespaces, the pod
    offloader's echoes, the namespaces watched at home, which Node names may be the agent's,
    where this consumer's NamespaceMap is, and the peering's cluster ids."""

    informers: Informers
    queue: KeyQueue
    twins: TwinNamespaces
    echoes: Echoes
    offloaded: OffloadedNamespaces
    may_be_node: Callable[[str], bool]
    tenant_namespace: str
    namespace_map_name: str
    home_cluster_id: str
    remote_cluster_id: str


def namespace_keys(pods: Mirror, shadow_pods: Mirror, twins: TwinNamespaces,
                   namespace: str) -> Iterator[Hashable]:
    """Everything that reads a namespace's offloading: the namespace and its pods (home, and
    those known by their ShadowPod only), and which namespaces are watched."""
    yield NAMESPACES_KEY
    yield offloading_key(namespace)
    for pod_namespace, name in pods.keys():
        if pod_namespace == namespace:
            yield pod_key(pod_namespace, name)
    remote_namespace = twins.mapped(namespace)
    for shadow_namespace, name in shadow_pods.keys():
        if shadow_namespace == remote_namespace:
            yield pod_key(namespace, name)


def twin_offloading_keys(twins: TwinNamespaces, change: Change) -> Iterator[Hashable]:
    """The offloading of the home namespace whose twin the changed object is in."""
    home_namespace = twins.home_of(change.key[0])
    if home_namespace is not None:
        yield offloading_key(home_namespace)


def node_keys(may_be_node: Callable[[str], bool], change: Change) -> Iterator[Hashable]:
    log.debug("node event %s %s", change.event_type, change.key)
    if may_be_node(change.key[1]):
        yield NODE_KEY
        yield NAMESPACES_KEY  # its labels select namespaces


def virtual_node_keys(remote_cluster_id: str, offloadings: Mirror, pods: Mirror,
                      change: Change) -> Iterator[Hashable]:
    """This agent's VirtualNode configures the node, the offloadings and the pods."""
    if (change.obj.get("spec") or {}).get("clusterId") != remote_cluster_id:
        return
    yield NODE_KEY
    yield NAMESPACES_KEY
    for namespace, _ in offloadings.keys():
        yield offloading_key(namespace)
    for namespace, name in pods.keys():
        yield pod_key(namespace, name)


def home_pod_keys(echoes: Echoes, change: Change) -> Iterator[Hashable]:
    """A pod's change, but the watch's echo of the pod offloader's own status write
    (`home_agent.pod`)."""
    if not echoes.echo((HOME, *change.key), change):
        yield pod_key(*change.key)


def shadow_pod_keys(echoes: Echoes, twins: TwinNamespaces, change: Change) -> Iterator[Hashable]:
    """A ShadowPod's change, but the watch's echo of the pod offloader's own write."""
    if echoes.echo((REMOTE, *change.key), change):
        return
    home_namespace = twins.home_of(change.key[0])
    if home_namespace is not None:
        yield pod_key(home_namespace, change.key[1])


def token_secret_pod_keys(twins: TwinNamespaces, shadow_pods: Mirror,
                          change: Change) -> Iterator[Hashable]:
    """A token Secret made for a pod not offloaded yet: the pod waits for it (`home_agent.pod`)."""
    if change.deleted or not is_token_secret(change.obj):
        return
    pod_name = token_secret_pod_name(change.obj)
    home_namespace = twins.home_of(change.key[0])
    if pod_name is None or home_namespace is None:
        return
    if shadow_pods.get((change.key[0], pod_name)) is None:
        yield pod_key(home_namespace, pod_name)


def offer_keys(tenant_namespace: str, change: Change) -> Iterator[Hashable]:
    # Only the node reads the offer (capacity, labels); the provider republishes it as its
    # usage changes, which must not requeue every pod.
    if change.key[0] == tenant_namespace:
        yield NODE_KEY


def mapping_change(routes: AgentRoutes, change: Change) -> tuple[NamespaceMap | None, ...]:
    """This agent's NamespaceMap before and after `change`, when its mapping (desired or
    current) changed; () for another consumer's map, or a write that left the mapping as it
    was (the enforcer's kopf records, labels): nothing anyone reads changed."""
    if change.key != (routes.tenant_namespace, routes.namespace_map_name):
        return ()
    before = NamespaceMap.model_validate(change.before) if change.before else None
    after = routes.twins.namespace_map()
    if _mapping(before) == _mapping(after):
        return ()
    return before, after


def _mapping(namespace_map: NamespaceMap | None) -> tuple[Any, Any] | None:
    if namespace_map is None:
        return None
    return namespace_map.spec.desired_mapping, namespace_map.status.current_mapping


def namespace_map_keys(routes: AgentRoutes, namespace_keys: Callable[[str], Iterator[Hashable]],
                       change: Change) -> Iterator[Hashable]:
    """The namespaces the mapping touched, before or after (`namespace_keys`), and the twins
    watch."""
    maps = mapping_change(routes, change)
    if not maps:
        return
    touched: set[str] = set()
    for namespace_map in maps:
        if namespace_map is not None:
            touched |= set(namespace_map.spec.desired_mapping)
            touched |= set(namespace_map.status.current_mapping)
    for namespace in touched:
        yield from namespace_keys(namespace)
    yield TWINS_KEY


def declare_agent(routes: AgentRoutes) -> None:
    """The agent's own resources, mirrors (`home_agent.agent.Mirrors`) and keys."""
    informers, queue, twins = routes.informers, routes.queue, routes.twins
    pods = informers.mirror(HOME, PODS.plural)
    shadow_pods = informers.mirror(REMOTE, SHADOWPOD.plural)
    offloadings = informers.mirror(HOME, NAMESPACE_OFFLOADING.plural)
    keys_of_namespace = functools.partial(namespace_keys, pods, shadow_pods, twins)

    def namespace_listed(namespace: str) -> None:
        """Its pods, held back until then, are looked at."""
        for key in keys_of_namespace(namespace):
            queue.add(key)

    routes.offloaded.on_listed(namespace_listed)
    informers.watch(HOME, PODS.resource, by=NODE_PODS_WATCH)
    for resource in (NODES.resource, VIRTUAL_NODE.resource, NAMESPACE_OFFLOADING.resource):
        informers.watch(HOME, resource, by=HOME_WATCH)
    # Only our own ShadowPods; the tenant namespace's map and offer are this consumer's.
    informers.watch(REMOTE, SHADOWPOD.resource, by=TWINS_WATCH, label_selector=ownership_selector(
        routes.home_cluster_id, routes.remote_cluster_id))
    for resource in (RESOURCE_OFFER.resource, NAMESPACE_MAP.resource):
        informers.watch(REMOTE, resource, by=TENANT_WATCH)
    # The watch selects the pods bound to the virtual node.
    informers.keys(HOME, PODS.plural, functools.partial(home_pod_keys, routes.echoes), queue)
    informers.keys(HOME, NODES.plural, functools.partial(node_keys, routes.may_be_node), queue)
    informers.keys(HOME, VIRTUAL_NODE.plural, functools.partial(
        virtual_node_keys, routes.remote_cluster_id, offloadings, pods), queue)
    informers.keys(HOME, NAMESPACE_OFFLOADING.plural,
                   lambda change: keys_of_namespace(change.key[0]), queue)
    informers.keys(REMOTE, SHADOWPOD.plural,
                   functools.partial(shadow_pod_keys, routes.echoes, twins), queue,
                   priority=REPORTED)
    informers.keys(REMOTE, RESOURCE_OFFER.plural,
                   functools.partial(offer_keys, routes.tenant_namespace), queue)
    informers.keys(REMOTE, NAMESPACE_MAP.plural,
                   functools.partial(namespace_map_keys, routes, keys_of_namespace), queue,
                   compares=True)


# --- resource reflection ---------------------------------------------------------------------


def copied_pod_keys(reflection: Reflection, plural: str, change: Change) -> Iterator[Hashable]:
    """The pods that waited for the copy that came."""
    for namespace, name in reflection.required.waiting_pods(plural, change):
        yield pod_key(namespace, name)


def declare_reflector(informers: Informers, reflector: Reflector) -> None:
    """One kind's: both sides' mirrors (at home every object of the namespaces offloaded here;
    remotely every object of the twin namespaces, not only ours: a foreign object in the way
    must be seen), each event to its home key."""
    resource, plural = reflector.rules.resource, reflector.rules.plural
    informers.watch(HOME, resource, by=OFFLOADED_WATCH)
    informers.watch(REMOTE, resource, keep=reflector.kept_remote, by=TWINS_WATCH)
    informers.keys(HOME, plural, reflector.home_keys, reflector.controller)
    informers.keys(REMOTE, plural, reflector.remote_keys, reflector.controller)


def declare_reflection(routes: AgentRoutes, reflection: Reflection) -> None:
    """Every enabled kind's reflector, then the companions (they read the kinds' mirrors), then
    the resyncs: a VirtualNode (the skip lists) or the NamespaceMap (which namespaces are
    extended) changes every key's outcome."""
    informers = routes.informers
    for reflector in reflection.reflectors.values():
        declare_reflector(informers, reflector)
    slices = reflection.reflectors.get(ENDPOINTSLICES.plural)
    if isinstance(slices, EndpointSliceReflector) and SERVICES.plural in reflection.reflectors:
        informers.keys(HOME, SERVICES.plural, slices.service_keys, slices.controller,
                       compares=True)
    events = reflection.companion(EventReflector)
    if events is not None:
        # Our copies at home are listed by the reflector, not watched (see its module).
        informers.watch(REMOTE, EVENTS.resource, keep=remote_event_kept, by=TWINS_WATCH)
        informers.keys(REMOTE, EVENTS.plural, events.remote_keys, events.controller,
                       compares=True)
        # The objects Events are about: the pods bound to the virtual node, the kinds' copies.
        informers.keys(HOME, PODS.plural, functools.partial(events.home_object_keys, "Pod"),
                       events.controller)
        for plural, reflector in reflection.reflectors.items():
            kind = reflector.rules.kind
            informers.keys(HOME, plural, functools.partial(events.home_object_keys, kind),
                           events.controller)
            informers.keys(REMOTE, plural, functools.partial(events.remote_object_keys, kind),
                           events.controller)
    claims = reflection.reflectors.get(PERSISTENTVOLUMECLAIMS.plural)
    if isinstance(claims, PersistentVolumeClaimReflector):
        # The storage fabric: the home volumes the agent provisions, each to its claim's key.
        informers.watch(HOME, PERSISTENTVOLUMES.resource, keep=claims.kept_volume, by=HOME_WATCH)
        informers.keys(HOME, PERSISTENTVOLUMES.plural, claims.volume_keys, claims.controller)
        # A twin's claims hold its namespace's withdrawal (home_agent.namespace_offloading).
        informers.keys(REMOTE, PERSISTENTVOLUMECLAIMS.plural,
                       functools.partial(twin_offloading_keys, routes.twins), routes.queue)
    tokens = reflection.companion(TokenReflector)
    if tokens is not None:
        declare_token_reflector(routes, tokens, reflection.reflectors.get(SECRETS.plural))
    for plural in reflection.required.plurals:
        # A copy a pod needs came: its ShadowPod may be made (`home_agent.reflection.required`).
        informers.keys(REMOTE, plural, functools.partial(copied_pod_keys, reflection, plural),
                       routes.queue, priority=UNBLOCKED)
    informers.on(HOME, VIRTUAL_NODE.plural, lambda _: reflection.resync())
    routes.offloaded.on_listed(reflection.resync)
    informers.on(REMOTE, NAMESPACE_MAP.plural,
                 lambda change: reflection.resync() if mapping_change(routes, change) else None,
                 compares=True)


def declare_virtual_node_followers(routes: AgentRoutes, listed: threading.Event,
                                   follow: Callable[[], None],
                                   follow_nodes: Callable[[], None]) -> None:
    """Once VirtualNodes are `listed`, each VirtualNode change may rename the virtual nodes
    (their pods watches follow) or move the remote credentials' Secret: `follow()`, after the
    resync; each change of the offer (its pools) or of one of the agent's Nodes may add or
    remove a node: `follow_nodes()`."""
    def on_change(_: Change) -> None:
        if listed.is_set():
            follow()

    def on_offer(change: Change) -> None:
        if listed.is_set() and change.key[0] == routes.tenant_namespace:
            follow_nodes()

    def on_node(change: Change) -> None:
        if listed.is_set() and routes.may_be_node(change.key[1]):
            follow_nodes()

    routes.informers.on(HOME, VIRTUAL_NODE.plural, on_change)
    routes.informers.on(HOME, NODES.plural, on_node)
    routes.informers.on(REMOTE, RESOURCE_OFFER.plural, on_offer)


def declare_token_reflector(routes: AgentRoutes, tokens: TokenReflector,
                            secrets: Reflector | None) -> None:
    """The pods' tokens: the pods bound to the virtual node, and one mirror of the remote
    Secrets, shared with the Secret reflector (`secrets`, when it runs)."""
    kept_secret = secrets.kept_remote if secrets is not None else None

    def kept(secret: dict[str, Any]) -> dict[str, Any] | None:
        # The token Secrets as the token reflector reads them, the rest as the Secret reflector
        # does (not at all without it).
        summary = tokens.kept_remote(secret)
        if summary is not None or kept_secret is None:
            return summary
        return kept_secret(secret)

    informers = routes.informers
    informers.watch(REMOTE, SECRETS.resource, keep=kept, by=TWINS_WATCH)
    informers.keys(HOME, PODS.plural, tokens.pod_keys, tokens.controller)
    informers.keys(REMOTE, SECRETS.plural, tokens.secret_keys, tokens.controller)
    informers.keys(REMOTE, SECRETS.plural, functools.partial(
        token_secret_pod_keys, routes.twins, informers.mirror(REMOTE, SHADOWPOD.plural)),
        routes.queue, priority=UNBLOCKED)
