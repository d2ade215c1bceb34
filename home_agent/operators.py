"""Two kopf operators, one per cluster, each on its own thread with its own event loop and
registry (operators sharing a loop stop together), standalone (no peering objects).

Only `@kopf.on.event` handlers: they never write to the watched objects (no finalizers, no
annotations), which matters for user pods and the virtual Node. They feed the agent's mirrors
and queue; the reconcile workers do the writing.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
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

log = logging.getLogger(__name__)

EventSink = Callable[[str, str | None, dict[str, Any]], None]
"""(plural, event type, object) → None; called on the operator's thread."""

Watched = tuple[str, str, str]
"""(group, version, plural); group "" for the core API."""


def _watched(definition: ResourceDefinition) -> Watched:
    return (definition.group, definition.version, definition.plural)


HOME_RESOURCES: tuple[Watched, ...] = (
    ("", "v1", "pods"),
    ("", "v1", "nodes"),
    _watched(VIRTUAL_NODE),
    _watched(NAMESPACE_OFFLOADING),
)
REMOTE_RESOURCES: tuple[Watched, ...] = (
    _watched(SHADOWPOD),
    _watched(NAMESPACE_MAP),
    _watched(RESOURCE_OFFER),
)


def build_registry(connection: Connection, resources: tuple[Watched, ...], sink: EventSink,
                   sentinel: Watched, on_synced: Callable[[], None]) -> kopf.OperatorRegistry:
    """Mirror `resources` into `sink`; call `on_synced` once every resource's initial listing
    is in the mirrors.

    kopf runs index handlers on every object of the initial listings before it runs any other
    handler. So each resource gets an index handler that feeds the mirror, and the first event
    of `sentinel` (a watch that always has one object, e.g. a namespace that must exist) comes
    only once every listing is mirrored: that is when nothing is missing because of a cache
    that is still filling (Liqo #2748). Event handlers keep the mirrors current afterwards
    (deletions included: index handlers are not called for those).
    """
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf_login(connection)

    for group, version, plural in resources:

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

    group, version, plural = sentinel
    kopf.on.event(group, version, plural, registry=registry, id="synced")(_async(on_sentinel))
    return registry


def _async(function: Callable[..., None]) -> Callable[..., Any]:
    # An async handler runs on the operator's loop: no thread hop per event.
    async def handler(**kwargs: Any) -> None:
        function(**kwargs)
    return handler


def settings(label_selectors: dict[Watched, str] | None = None,
             field_selectors: dict[Watched, str] | None = None) -> kopf.OperatorSettings:
    configured = kopf.OperatorSettings()
    configured.posting.enabled = False  # never post framework Events on watched objects
    configured.watching.server_timeout = 300
    configured.watching.client_timeout = 330
    configured.networking.request_timeout = 60
    for (group, version, plural), selector in (label_selectors or {}).items():
        configured.watching.label_selectors[(group, version, plural)] = selector
    for (group, version, plural), selector in (field_selectors or {}).items():
        configured.watching.field_selectors[(group, version, plural)] = selector
    return configured


NAMESPACES: Watched = ("", "v1", "namespaces")
HOME_SENTINEL_NAMESPACE = "kube-system"
"""Exists in every cluster: the home operator's sync sentinel."""


def sentinel_selector(namespace: str) -> dict[Watched, str]:
    """Watch one namespace only (RBAC can grant exactly that with resourceNames)."""
    return {NAMESPACES: f"metadata.name={namespace}"}


def remote_label_selectors(home_cluster_id: str, remote_cluster_id: str) -> dict[Watched, str]:
    """Only our own ShadowPods are watched remotely."""
    labels = ownership_labels(home_cluster_id, remote_cluster_id)
    return {_watched(SHADOWPOD): ",".join(f"{k}={v}" for k, v in sorted(labels.items()))}


class OperatorThread:
    """Runs one kopf operator on a thread of its own; `stop()` ends it."""

    def __init__(self, name: str, registry: kopf.OperatorRegistry,
                 operator_settings: kopf.OperatorSettings) -> None:
        self.name = name
        self._registry = registry
        self._settings = operator_settings
        self._stop = threading.Event()
        self.ready = threading.Event()
        self.failed: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"operator-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            asyncio.run(kopf.operator(registry=self._registry, settings=self._settings,
                                      standalone=True, clusterwide=True,
                                      stop_flag=self._stop, ready_flag=self.ready))
        except BaseException as error:  # noqa: BLE001 - reported to the main thread
            self.failed = error
            log.exception("operator %s stopped", self.name)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
