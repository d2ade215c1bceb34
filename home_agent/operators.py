"""kopf operators, each on its own thread with its own event loop and registry (operators
sharing a loop stop together), standalone (no peering objects):

- home: pods, nodes, VirtualNodes, NamespaceOffloadings, cluster-wide;
- remote tenant: this consumer's NamespaceMap and ResourceOffer, in the tenant namespace;
- remote twins: ShadowPods, in the accepted twin namespaces only — the consumer identity's
  permissions stop at the tenant and twin namespaces (DESIGN.md 7), so nothing remote is
  watched cluster-wide. kopf cannot add namespaces to a running operator without listing all
  namespaces, so this operator is replaced when the set of twin namespaces changes.

Only `@kopf.index` and `@kopf.on.event` handlers: they never write to the watched objects (no
finalizers, no annotations), which matters for user pods and the virtual Node. They feed the
agent's mirrors and queue; the reconcile workers do the writing.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import kopf

from annex.kube import Connection, kopf_login
from shared.api.namespace_map import NAMESPACE_MAP
from shared.api.namespace_offloading import NAMESPACE_OFFLOADING
from shared.api.resource import ResourceDefinition
from shared.api.resource_offer import RESOURCE_OFFER
from shared.api.shadowpod import SHADOWPOD
from shared.api.virtual_node import VIRTUAL_NODE
from shared.ownership import ownership_labels
from shared.wellknown import KUBE_ROOT_CA_CONFIGMAP

log = logging.getLogger(__name__)

EventSink = Callable[[str, str | None, dict[str, Any]], None]
"""(plural, event type, object) → None; called on the operator's thread."""

Watched = tuple[str, str, str]
"""(group, version, plural); group "" for the core API."""


def watched(definition: ResourceDefinition) -> Watched:
    return (definition.group, definition.version, definition.plural)


NAMESPACES: Watched = ("", "v1", "namespaces")
CONFIGMAPS: Watched = ("", "v1", "configmaps")


@dataclass(frozen=True)
class Sentinel:
    """An object that always exists where an operator watches: its first event tells that every
    initial listing is mirrored (see `build_registry`)."""

    resource: Watched
    name: str
    server_side: bool = True
    """Watch only this name (a field selector), or filter it client-side."""


@dataclass(frozen=True)
class WatchSpec:
    name: str
    resources: tuple[Watched, ...]
    sentinel: Sentinel
    namespaces: Collection[str] | None = None
    """None: cluster-wide."""
    label_selectors: dict[Watched, str] = field(default_factory=dict)


HOME_SENTINEL_NAMESPACE = "kube-system"
"""Exists in every cluster."""


def home_watch(reflected: tuple[Watched, ...] = (),
               label_selectors: Mapping[Watched, str] | None = None) -> WatchSpec:
    """`reflected`: the kinds resource reflection copies (cluster-wide: a namespace may become
    extended at any time); `label_selectors` narrow some of them (e.g. only our Event copies)."""
    return WatchSpec(
        "home",
        (("", "v1", "pods"), ("", "v1", "nodes"), watched(VIRTUAL_NODE),
         watched(NAMESPACE_OFFLOADING), *reflected),
        Sentinel(NAMESPACES, HOME_SENTINEL_NAMESPACE),
        label_selectors=dict(label_selectors or {}))


def tenant_watch(tenant_namespace: str, namespace_map_name: str) -> WatchSpec:
    """The sentinel is the agent's own NamespaceMap: the agent creates it before watching."""
    return WatchSpec(
        "remote-tenant", (watched(NAMESPACE_MAP), watched(RESOURCE_OFFER)),
        Sentinel(watched(NAMESPACE_MAP), namespace_map_name, server_side=False),
        namespaces=(tenant_namespace,))


def twins_watch(namespaces: Collection[str], home_cluster_id: str,
                remote_cluster_id: str, reflected: tuple[Watched, ...] = ()) -> WatchSpec:
    """Only our own ShadowPods; the sentinel is the root CA ConfigMap every namespace has.
    `reflected` kinds are watched whole (not only ours: a foreign object in the way must be
    seen), so the sentinel is then filtered client-side."""
    labels = ownership_labels(home_cluster_id, remote_cluster_id)
    return WatchSpec(
        "remote-twins", (watched(SHADOWPOD), *reflected),
        Sentinel(CONFIGMAPS, KUBE_ROOT_CA_CONFIGMAP, server_side=CONFIGMAPS not in reflected),
        namespaces=tuple(sorted(namespaces)),
        label_selectors={watched(SHADOWPOD): ",".join(f"{k}={v}"
                                                     for k, v in sorted(labels.items()))})


def build_registry(connection: Connection, spec: WatchSpec, sink: EventSink,
                   on_synced: Callable[[], None]) -> kopf.OperatorRegistry:
    """Mirror the spec's resources into `sink`; call `on_synced` once every resource's initial
    listing is in the mirrors.

    kopf runs index handlers on every object of the initial listings (of every resource and
    namespace) before it runs any other handler. So each resource gets an index handler that
    feeds the mirror, and the first event of the sentinel comes only once every listing is
    mirrored: from then on nothing is missing because a cache is still filling (Liqo #2748).
    Event handlers keep the mirrors current (deletions included: index handlers are not called
    for those).
    """
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf_login(connection)

    for group, version, plural in spec.resources:

        def on_listed(body: Any, _plural: str = plural, **_: Any) -> None:
            sink(_plural, "INDEXED", dict(body))

        def on_event(event: dict[str, Any], _plural: str = plural, **_: Any) -> None:
            sink(_plural, event.get("type"), event["object"])

        kopf.index(group, version, plural, registry=registry,
                   id=f"listed-{plural}")(_async(on_listed))
        kopf.on.event(group, version, plural, registry=registry,
                      id=f"mirror-{plural}")(_async(on_event))

    synced = False

    def on_sentinel(**_: Any) -> None:
        nonlocal synced
        if not synced:
            synced = True
            on_synced()

    group, version, plural = spec.sentinel.resource
    kopf.on.event(group, version, plural, registry=registry, id="synced",
                  field="metadata.name", value=spec.sentinel.name)(_async(on_sentinel))
    return registry


def _async(function: Callable[..., None]) -> Callable[..., Any]:
    # An async handler runs on the operator's loop: no thread hop per event.
    async def handler(**kwargs: Any) -> None:
        function(**kwargs)
    return handler


def settings(spec: WatchSpec) -> kopf.OperatorSettings:
    configured = kopf.OperatorSettings()
    configured.posting.enabled = False  # never post framework Events on watched objects
    configured.watching.server_timeout = 300
    configured.watching.client_timeout = 330
    configured.networking.request_timeout = 60
    if spec.namespaces is not None:
        # Confined to namespaces: no cluster-wide CRD or namespace scans (the remote identity
        # may not list those; the resources are discovered once at start).
        configured.scanning.disabled = True
    for resource, selector in spec.label_selectors.items():
        configured.watching.label_selectors[resource] = selector
    if spec.sentinel.server_side:
        configured.watching.field_selectors[spec.sentinel.resource] = (
            f"metadata.name={spec.sentinel.name}")
    return configured


class OperatorThread:
    """Runs one kopf operator on a thread of its own; `stop()` ends it."""

    def __init__(self, connection: Connection, spec: WatchSpec, sink: EventSink,
                 on_synced: Callable[[], None]) -> None:
        self.name = spec.name
        self.spec = spec
        self._registry = build_registry(connection, spec, sink, on_synced)
        self._settings = settings(spec)
        self._stop = threading.Event()
        self.failed: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"operator-{spec.name}",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        scope: dict[str, Any] = (
            {"clusterwide": True} if self.spec.namespaces is None
            else {"namespaces": list(self.spec.namespaces)})
        try:
            asyncio.run(kopf.operator(registry=self._registry, settings=self._settings,
                                      standalone=True, stop_flag=self._stop, **scope))
        except BaseException as error:  # noqa: BLE001 - reported to the main thread
            self.failed = error
            log.exception("operator %s stopped", self.name)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
