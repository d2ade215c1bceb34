"""The agent's watches, each a task on the agent's event loop with its own client:

- home: nodes, VirtualNodes, NamespaceOffloadings (and the volumes the agent provisions),
  cluster-wide;
- home pods: only those bound to the virtual node (`NodePodsWatch` follows its name);
- home offloaded namespaces: the reflected kinds, in the namespaces this agent offloads only
  (`OffloadedNamespaceWatches`, one watch a namespace) — the home controller grants each agent
  those namespaces' reads and nothing else (`home_controller.namespace_grants`);
- remote tenant: this consumer's NamespaceMap and ResourceOffer, in the tenant namespace;
- remote twins: ShadowPods, in the accepted twin namespaces only — the consumer identity's
  permissions stop at the tenant and twin namespaces, so nothing remote is
  watched cluster-wide. This watch is replaced when the set of twin namespaces changes.

They only read: never a write to a watched object (no finalizers, no annotations), which
matters for user pods and the virtual Node. They feed the agent's mirrors and queues (the
informer registry); the reconcile workers do the writing.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from annex.api_paths import group_path
from annex.informers import Informers, Resource
from annex.kube import Connection, LiveConnection
from annex.kubeapi import ClusterApi
from annex.listwatch import list_and_watch
from home_agent.offloaded_namespaces import OffloadedNamespaces
from shared.api.builtin import PODS

log = logging.getLogger(__name__)

EventSink = Callable[[str, str | None, dict[str, Any]], None]
"""(plural, event type, object) → None; called on the agent's event loop."""


# The agent's watches, by name: what each lists is declared in the informer registry
# (`home_agent.routes`, `Informers.watch(..., by=...)`).
HOME_WATCH = "home"
"""Cluster-wide: what says which namespaces are offloaded, the nodes, the volumes."""
OFFLOADED_WATCH = "home-offloaded"
"""The reflected kinds, in each namespace this agent offloads (`OffloadedNamespaceWatches`)."""
NODE_PODS_WATCH = "home-pods"
"""The pods bound to the virtual node (`NodePodsWatch`)."""
TENANT_WATCH = "remote-tenant"
TWINS_WATCH = "remote-twins"


@dataclass(frozen=True)
class WatchSpec:
    name: str
    queries: dict[Resource, dict[str, str]]
    """Each resource listed, with the query parameters that narrow its list and watch."""
    namespaces: Collection[str] | None = None
    """None: cluster-wide."""


def declared_watch(informers: Informers, side: str, name: str,
                   namespaces: Collection[str] | None = None) -> WatchSpec:
    """The watch `name` on `side` as the registry declares it, in `namespaces`."""
    return WatchSpec(name, {resource: {"labelSelector": selector} if selector else {}
                            for resource, selector in informers.watched(side, name).items()},
                     namespaces)


def node_pods_watch(node_name: str) -> WatchSpec:
    """The home pods bound to the virtual node, as a kubelet watches its own: every other pod of
    the cluster (most of them, on a busy cluster) never reaches the agent. Declared by hand:
    its field selector follows the node's name."""
    return WatchSpec(NODE_PODS_WATCH,
                     {PODS.resource: {"fieldSelector": f"spec.nodeName={node_name}"}})


KEY_ONLY = ("namespace", "name")
"""What the agent's handlers need of an object a relist no longer shows: its key (every mirror
and index is by key), and nothing else kept for each of the hundred thousand objects watched."""


class Watch:
    """Mirrors a WatchSpec's resources into the sink (one `list_and_watch` per resource and
    namespace), as one task on the agent's event loop with a client of its own. `on_synced` is
    called once every initial list is in the sink: nothing is decided from a cache still filling
    (Liqo #2748). Started, stopped and fed on the loop's thread: once `stop` returns, the sink
    hears nothing more from it.

    kopf did this before, at a cost that grew with the square of the objects listed (every
    indexed object toggles a set all other objects' workers wait on): minutes for 2,000 pods.
    """

    def __init__(self, connection: Connection | LiveConnection, spec: WatchSpec,
                 sink: EventSink, on_synced: Callable[[], None]) -> None:
        self.spec = spec
        self._connection = connection
        self._sink = sink
        self._on_synced = on_synced
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        # A context of its own: a watch started by a reconcile (the twins', a namespace's)
        # outlives it, and its log lines must not carry that reconcile's tags.
        self._task = asyncio.get_running_loop().create_task(
            self._main(), name=f"watch-{self.spec.name}", context=contextvars.Context())

    async def _main(self) -> None:
        api = ClusterApi(self._connection, throttle_reads=False)
        namespaces = ("",) if self.spec.namespaces is None else self.spec.namespaces
        scopes = [(resource, each) for resource in self.spec.queries for each in namespaces]
        unlisted = len(scopes)

        def listed() -> None:
            nonlocal unlisted
            unlisted -= 1
            if unlisted == 0:
                self._on_synced()

        if not scopes:
            self._on_synced()
        try:
            await asyncio.gather(*(self._reflect(api, resource, namespace, listed)
                                   for resource, namespace in scopes))
        except asyncio.CancelledError:
            raise
        except Exception:  # a sink that raised: reported by `is_alive`
            log.exception("watch %s stopped", self.spec.name)
        finally:
            await api.close()

    async def _reflect(self, api: ClusterApi, resource: Resource, namespace: str,
                       listed: Callable[[], None]) -> None:
        group, version, plural = resource
        await list_and_watch(
            api, group_path(group, version, plural, namespace),
            lambda event_type, obj: self._sink(plural, event_type, obj),
            query=self.spec.queries[resource], on_listed=listed, identity=KEY_ONLY,
            name=self.spec.name)

    def is_alive(self) -> bool:
        return self._task is not None and not self._task.done()

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()


class NodePodsWatch:
    """The `node_pods_watch` of each of the agent's nodes (one, or one per pool of the offer), as
    each kubelet watches its own node's pods. `follow(names)` is called once the home watch has
    listed VirtualNodes and again whenever the nodes may change (a VirtualNode renaming them,
    the offer's pools, a node deleted): the watches of the nodes gained start, those of the
    nodes lost stop, and their pods leave the sink as DELETED, as pods leaving a field
    selector's selection do. `pods` returns what the sink holds from these watches;
    `on_synced` is called once the first nodes' pods are all listed. Alive until it has names
    to follow."""

    def __init__(self, connection: Connection, sink: EventSink, on_synced: Callable[[], None],
                 pods: Callable[[], list[dict[str, Any]]]) -> None:
        self._connection = connection
        self._sink = sink
        self._on_synced = on_synced
        self._pods = pods
        self._watches: dict[str, Watch] = {}
        self._unlisted: set[str] | None = None
        """The first nodes whose pods are not listed yet (None: not followed yet, or all
        listed once)."""
        self._followed = False

    @property
    def node_names(self) -> frozenset[str]:
        return frozenset(self._watches)

    def follow(self, node_names: Collection[str]) -> None:
        """Watch the pods of exactly `node_names` (on the agent's loop)."""
        wanted = frozenset(node_names)
        for name in sorted(set(self._watches) - wanted):
            log.info("virtual node %s no longer the agent's: its pods are not watched", name)
            self._watches.pop(name).stop()
            for pod in self._pods():
                if (pod.get("spec") or {}).get("nodeName") == name:
                    self._sink(PODS.plural, "DELETED", pod)
        if not self._followed:
            self._followed, self._unlisted = True, set(wanted)
        for name in sorted(wanted - set(self._watches)):
            watch = self._watches[name] = Watch(self._connection, node_pods_watch(name),
                                                self._sink, functools.partial(self._listed, name))
            watch.start()
        if self._unlisted is not None:
            self._listed(*(self._unlisted - wanted))  # a first node gone counts as listed

    def _listed(self, *names: str) -> None:
        if self._unlisted is None:
            return
        self._unlisted -= set(names)
        if not self._unlisted:
            self._unlisted = None
            self._on_synced()

    def is_alive(self) -> bool:
        return all(watch.is_alive() for watch in self._watches.values())

    def stop(self) -> None:
        for watch in self._watches.values():
            watch.stop()


class OffloadedNamespaceWatches:
    """The OFFLOADED_WATCH, one `Watch` a namespace: `follow(namespaces)` starts the watches of
    the namespaces it gains and stops those of the namespaces it loses, whose objects leave the
    sink as DELETED (as objects leaving a selection do), without relisting the others. Each
    namespace counts as listed (`state`) once its watch's first lists are in the sink; until
    then nothing of it is decided (a pod waiting for copies would see none). A namespace whose
    reads are not granted yet (the home controller binds them once the NamespaceOffloading
    selects this agent) is listed again with backoff until they are."""

    def __init__(self, connection: Connection, informers: Informers, side: str,
                 sink: EventSink, state: OffloadedNamespaces) -> None:
        self._connection = connection
        self._informers = informers
        self._side = side
        self._sink = sink
        self.state = state
        self._watches: dict[str, Watch] = {}

    def _spec(self, namespace: str) -> WatchSpec:
        return declared_watch(self._informers, self._side, OFFLOADED_WATCH, (namespace,))

    def follow(self, namespaces: Collection[str]) -> None:
        """Watch exactly `namespaces` (on the agent's loop)."""
        wanted = frozenset(namespaces)
        for namespace in sorted(set(self._watches) - wanted):
            self._watches.pop(namespace).stop()
            self.state.forget(namespace)
            for _, _, plural in self._spec(namespace).queries:
                mirror = self._informers.mirror(self._side, plural)
                for key in mirror.keys():
                    if key[0] == namespace and (obj := mirror.get(key)) is not None:
                        self._sink(plural, "DELETED", obj)
            log.info("namespace %s no longer offloaded here: its objects are not watched",
                     namespace)
        for namespace in sorted(wanted - set(self._watches)):
            self.state.follow(namespace)
            watch = self._watches[namespace] = Watch(
                self._connection, self._spec(namespace), self._sink,
                functools.partial(self._listed, namespace))
            watch.start()
            log.info("namespace %s offloaded here: watching its objects", namespace)

    def _listed(self, namespace: str) -> None:
        if namespace in self._watches:
            self.state.listed(namespace)
            log.info("namespace %s listed", namespace)

    def is_alive(self) -> bool:
        return all(watch.is_alive() for watch in self._watches.values())

    def stop(self) -> None:
        for watch in self._watches.values():
            watch.stop()
