"""The mutating admission webhook for home pods (AdmissionReview v1 over HTTPS): pods created in
a namespace with a NamespaceOffloading get its pod offloading strategy, its clusterSelector as
required node affinity, the virtual nodes' not-ready toleration, and a required node affinity
keeping them off the virtual nodes no provider node of which has room for them (the pure mutation
is `shared.forge.offloading_strategy`). A namespace without one is left alone, and a malformed
request is answered allowed without a patch: this webhook must never block pods."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import jsonpatch
from aiohttp import web
from pydantic import ValidationError

from annex.metrics import ServedRequests
from annex.mirror import Mirror
from annex.webhooks import admission_application, admission_request, serve_tls
from shared.admission import review_response
from shared.api.namespace_offloading import NAMESPACE_OFFLOADING_NAME
from shared.api.virtual_node import VirtualNode
from shared.forge.offloading_strategy import (
    VirtualNodeView,
    not_ready_toleration,
    pod_with_offloading_strategy,
    too_small_for,
    virtual_node_views,
)

log = logging.getLogger(__name__)

MUTATE_POD_PATH = "/mutate-pod"


@dataclass(frozen=True)
class WebhookMirrors:
    """What the webhook answers from: the home mirrors of the NamespaceOffloadings, the Nodes
    and the VirtualNodes."""

    offloadings: Mirror
    nodes: Mirror
    virtual_nodes: Mirror


def offloading_spec(offloadings: Mirror, namespace: str) -> dict[str, Any] | None:
    """The spec of `namespace`'s NamespaceOffloading, or None when it is not offloaded."""
    offloading = offloadings.get((namespace, NAMESPACE_OFFLOADING_NAME))
    if offloading is None or (offloading.get("metadata") or {}).get("deletionTimestamp"):
        return None
    return dict(offloading.get("spec") or {})


class VirtualNodes:
    """The home cluster's virtual nodes with their VirtualNode's settings, read again from the
    mirrors only when one of them changed (every pod creation asks)."""

    def __init__(self, mirrors: WebhookMirrors) -> None:
        self.mirrors = mirrors
        self._cached: tuple[tuple[int, int], list[VirtualNodeView]] | None = None

    def views(self) -> list[VirtualNodeView]:
        mirrors = self.mirrors
        versions = (mirrors.nodes.version, mirrors.virtual_nodes.version)  # before reading
        if self._cached is not None and self._cached[0] == versions:
            return self._cached[1]
        parsed = []
        for obj in mirrors.virtual_nodes.values():
            try:
                parsed.append(VirtualNode.model_validate(obj))
            except ValidationError:
                continue  # the agent of its cluster reports it
        views = virtual_node_views(mirrors.nodes.values(), parsed)
        self._cached = (versions, views)
        return views


def pod_mutation(mirrors: WebhookMirrors, request: dict[str, Any],
                 virtual_nodes: VirtualNodes | None = None) -> list[dict[str, Any]]:
    """The JSON patch a pod's admission `request` gets: its namespace's offloading strategy
    (none when the namespace is not offloaded or the pod is not being created)."""
    pod = request.get("object")
    namespace = request.get("namespace") or ((pod or {}).get("metadata") or {}).get("namespace")
    spec = offloading_spec(mirrors.offloadings, str(namespace or ""))
    if not isinstance(pod, dict) or spec is None or request.get("operation") != "CREATE":
        return []
    strategy = str(spec.get("podOffloadingStrategy") or "LocalAndRemote")
    selector = spec.get("clusterSelector") or {}
    views = (virtual_nodes or VirtualNodes(mirrors)).views()
    try:
        mutated = pod_with_offloading_strategy(pod, strategy, selector,
                                               not_ready_toleration(selector, views),
                                               too_small_for(pod, views))
    except ValueError as error:
        log.warning("namespace %s: %s", namespace, error)
        return []
    return list(jsonpatch.make_patch(pod, mutated).patch)


def application(mirrors: WebhookMirrors, served: ServedRequests | None = None
                ) -> web.Application:
    virtual_nodes = VirtualNodes(mirrors)

    async def mutate(request: web.Request) -> web.Response:
        admission = await admission_request(request)
        return web.json_response(review_response(
            str(admission.get("uid", "")), patch=pod_mutation(mirrors, admission, virtual_nodes)))

    app = admission_application([served.middleware] if served is not None else [])
    app.router.add_post(MUTATE_POD_PATH, mutate)
    return app


async def serve(mirrors: WebhookMirrors, address: str | None, cert: str | None, key: str | None,
                served: ServedRequests | None = None) -> web.AppRunner | None:
    """The pod webhook on `address` with `cert` and `key` (none without all three), its
    requests counted in `served` (/metrics)."""
    if not (address and cert and key):
        return None
    runner = await serve_tls(application(mirrors, served), address, cert, key)
    log.info("pod webhook serving on https://%s%s", address, MUTATE_POD_PATH)
    return runner
