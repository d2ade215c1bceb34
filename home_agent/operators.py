"""The agent's watches, each on its own thread with its own event loop and client:

- home: nodes, VirtualNodes, NamespaceOffloadings (and the reflected kinds), cluster-wide;
- home pods: only those bound to the virtual node (`NodePodsWatch` follows its name);
- remote tenant: this consumer's NamespaceMap and ResourceOffer, in the tenant namespace;
- remote twins: ShadowPods, in the accepted twin namespaces only — the consumer identity's
  permissions stop at the tenant and twin namespaces (DESIGN.md 7), so nothing remote is
  watched cluster-wide. This watch is replaced when the set of twin namespaces changes.

They only read: never a write to a watched object (no finalizers, no annotations), which
matters for user pods and the virtual Node. They feed the agent's mirrors and queue; the
reconcile workers do the writing.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from annex.kube import Connection, LiveConnection
from annex.kubeapi import ClusterApi, group_path
from annex.listwatch import list_and_watch
from shared.api.namespace_map import NAMESPACE_MAP
from shared.api.namespace_offloading import NAMESPACE_OFFLOADING
from shared.api.resource import ResourceDefinition
from shared.api.resource_offer import RESOURCE_OFFER
from shared.api.shadowpod import SHADOWPOD
from shared.api.virtual_node import VIRTUAL_NODE
from shared.ownership import ownership_labels

log = logging.getLogger(__name__)

EventSink = Callable[[str, str | None, dict[str, Any]], None]
"""(plural, event type, object) → None; called on the operator's thread."""

Watched = tuple[str, str, str]
"""(group, version, plural); group "" for the core API."""


def watched(definition: ResourceDefinition) -> Watched:
    return (definition.group, definition.version, definition.plural)


CONFIGMAPS: Watched = ("", "v1", "configmaps")


@dataclass(frozen=True)
class WatchSpec:
    name: str
    resources: tuple[Watched, ...]
    namespaces: Collection[str] | None = None
    """None: cluster-wide."""
    label_selectors: dict[Watched, str] = field(default_factory=dict)
    field_selectors: dict[Watched, str] = field(default_factory=dict)


PODS: Watched = ("", "v1", "pods")


def home_watch(reflected: tuple[Watched, ...] = (),
               label_selectors: Mapping[Watched, str] | None = None) -> WatchSpec:
    """`reflected`: the kinds resource reflection copies (cluster-wide: a namespace may become
    extended at any time); `label_selectors` narrow some of them (e.g. only our Event copies).
    Pods are not here: see `node_pods_watch`."""
    return WatchSpec(
        "home",
        (("", "v1", "nodes"), watched(VIRTUAL_NODE), watched(NAMESPACE_OFFLOADING), *reflected),
        label_selectors=dict(label_selectors or {}))


def node_pods_watch(node_name: str) -> WatchSpec:
    """The home pods bound to the virtual node, as a kubelet watches its own: every other pod of
    the cluster (most of them, on a busy cluster) never reaches the agent."""
    return WatchSpec("home-pods", (PODS,), field_selectors={PODS: f"spec.nodeName={node_name}"})


def tenant_watch(tenant_namespace: str) -> WatchSpec:
    return WatchSpec(
        "remote-tenant", (watched(NAMESPACE_MAP), watched(RESOURCE_OFFER)),
        namespaces=(tenant_namespace,))


def twins_watch(namespaces: Collection[str], home_cluster_id: str,
                remote_cluster_id: str, reflected: tuple[Watched, ...] = ()) -> WatchSpec:
    """Only our own ShadowPods; `reflected` kinds are watched whole (not only ours: a foreign
    object in the way must be seen)."""
    labels = ownership_labels(home_cluster_id, remote_cluster_id)
    return WatchSpec(
        "remote-twins", (watched(SHADOWPOD), *reflected),
        namespaces=tuple(sorted(namespaces)),
        label_selectors={watched(SHADOWPOD): ",".join(f"{k}={v}"
                                                     for k, v in sorted(labels.items()))})


KEY_ONLY = ("namespace", "name")
"""What the agent's handlers need of an object a relist no longer shows: its key (every mirror
and index is by key), and nothing else kept for each of the hundred thousand objects watched."""


def list_query(spec: WatchSpec, resource: Watched) -> dict[str, str]:
    """The query parameters that narrow one resource's list and watch."""
    query = {"labelSelector": spec.label_selectors.get(resource),
             "fieldSelector": spec.field_selectors.get(resource)}
    return {name: selector for name, selector in query.items() if selector}


class OperatorThread:
    """Mirrors a WatchSpec's resources into the sink from a thread of its own (its own loop and
    client): one `list_and_watch` per resource and namespace. `on_synced` is called once every
    initial list is in the sink: nothing is decided from a cache still filling (Liqo #2748).

    kopf did this before, at a cost that grew with the square of the objects listed (every
    indexed object toggles a set all other objects' workers wait on): minutes for 2,000 pods.
    """

    def __init__(self, connection: Connection | LiveConnection, spec: WatchSpec,
                 sink: EventSink, on_synced: Callable[[], None]) -> None:
        self.name = spec.name
        self.spec = spec
        self._connection = connection
        self._sink = sink
        self._on_synced = on_synced
        self._stop = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self.failed: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"watch-{spec.name}",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as error:  # noqa: BLE001 - reported to the main thread
            self.failed = error
            log.exception("watch %s stopped", self.name)

    async def _main(self) -> None:
        self._stopped = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        if self._stop.is_set():
            return
        api = ClusterApi(self._connection, throttle_reads=False)
        scopes = [(resource, namespace) for resource in self.spec.resources
                  for namespace in (self.spec.namespaces
                                    if self.spec.namespaces is not None else ("",))]
        unlisted = len(scopes)

        def listed() -> None:
            nonlocal unlisted
            unlisted -= 1
            if unlisted == 0:
                self._on_synced()

        if not scopes:
            self._on_synced()
        tasks = [asyncio.create_task(self._reflect(api, resource, namespace, listed))
                 for resource, namespace in scopes]
        stopped = asyncio.create_task(self._stopped.wait())
        try:
            done, _ = await asyncio.wait([stopped, *tasks], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in [stopped, *tasks]:
                task.cancel()
            await asyncio.gather(stopped, *tasks, return_exceptions=True)
            await api.close()
        for task in done:
            if task is not stopped and not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]

    async def _reflect(self, api: ClusterApi, resource: Watched, namespace: str,
                       listed: Callable[[], None]) -> None:
        group, version, plural = resource
        await list_and_watch(
            api, group_path(group, version, plural, namespace),
            lambda event_type, obj: self._sink(plural, event_type, obj),
            query=list_query(self.spec, resource), on_listed=listed, identity=KEY_ONLY,
            name=self.name)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None:
            try:
                loop.call_soon_threadsafe(stopped.set)
            except RuntimeError:  # the loop has closed already
                pass
        self._thread.join(timeout)



class NodePodsWatch:
    """The `node_pods_watch` of the virtual node's current name. The name can come from the
    VirtualNode, so `follow` is called once the home watch has listed VirtualNodes and again on
    each VirtualNode event, always from the home watch's thread; a new name replaces the watch,
    and the pods of the old name leave the sink as DELETED, as pods leaving a field selector's
    selection do. `pods` returns what the sink holds from this watch."""

    def __init__(self, connection: Connection, sink: EventSink, on_synced: Callable[[], None],
                 pods: Callable[[], list[dict[str, Any]]]) -> None:
        self._connection = connection
        self._sink = sink
        self._on_synced = on_synced
        self._pods = pods
        self._lock = threading.Lock()
        self.node_name: str | None = None
        self._operator: OperatorThread | None = None

    def follow(self, node_name: str) -> None:
        if node_name == self.node_name:
            return
        with self._lock:
            previous, self._operator = self._operator, None
        if previous is not None:
            log.info("virtual node renamed %s → %s: watching its pods", self.node_name,
                     node_name)
            previous.stop()
            for pod in self._pods():
                self._sink(PODS[2], "DELETED", pod)
        self.node_name = node_name
        operator = OperatorThread(self._connection, node_pods_watch(node_name), self._sink,
                                  self._on_synced)
        with self._lock:
            self._operator = operator
        operator.start()

    def is_alive(self) -> bool:
        with self._lock:
            return self._operator is None or self._operator.is_alive()

    def stop(self) -> None:
        with self._lock:
            operator = self._operator
        if operator is not None:
            operator.stop()
