"""EndpointSlice controller: keeps the managed slices of every Service with a selector equal to
what `slicing.desired_slices` computes; slices it does not manage are left alone."""

from __future__ import annotations

from typing import Any

from kubesim.apiserver import ApiServer, copy_json
from kubesim.controllers.base import (
    Controller,
    WorkQueue,
    kind_of,
    run_together,
    watch_forever,
)
from kubesim.controllers.slicing import (
    SERVICE_NAME_LABEL,
    desired_slices,
    is_managed,
    slice_content,
    slice_labels,
    slice_object,
)
from kubesim.errors import StatusError
from kubesim.selectors import label_selector_from_object
from kubesim.store import Stored

ServiceKey = tuple[str, str]


def _canonical(content: dict[str, Any]) -> str:
    return repr((sorted(map(repr, content["ports"])), sorted(map(repr, content["endpoints"]))))


class EndpointSliceController(Controller):
    name = "endpointslice"

    def __init__(self, api: ApiServer) -> None:
        super().__init__(api)
        self.services_kind = kind_of(api, "", "v1", "services")
        self.pods_kind = kind_of(api, "", "v1", "pods")
        self.nodes_kind = kind_of(api, "", "v1", "nodes")
        self.slices_kind = kind_of(api, "discovery.k8s.io", "v1", "endpointslices")
        self.queue = WorkQueue(self._reconcile, self.name, workers=2)

    def _on_service(self, event_type: str, stored: Stored) -> None:
        self.queue.add((stored.namespace, stored.name))

    def _on_pod(self, event_type: str, stored: Stored) -> None:
        # any service of the namespace may select it (before or after a label change)
        for service in self.api.store.list(self.services_kind.storage_key, stored.namespace):
            if (service.obj.get("spec") or {}).get("selector"):
                self.queue.add((service.namespace, service.name))

    def _on_slice(self, event_type: str, stored: Stored) -> None:
        service = (stored.obj["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL)
        if service and is_managed(stored.obj):
            self.queue.add((stored.namespace, service))

    def _managed_slices(self, namespace: str, service: str) -> list[Stored]:
        return [s for s in self.api.store.list(self.slices_kind.storage_key, namespace)
                if is_managed(s.obj)
                and (s.obj["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL) == service]

    async def _reconcile(self, key: ServiceKey) -> None:
        namespace, name = key
        stored = self.api.store.get(self.services_kind.storage_key, namespace, name)
        existing = self._managed_slices(namespace, name)
        if stored is None:
            for old in existing:  # the service went (the real controller leaves this to the GC)
                await self._delete(old)
            return
        spec = stored.obj.get("spec") or {}
        selector = spec.get("selector")
        if not selector or spec.get("type") == "ExternalName":
            # As pkg/controller/endpointslice: such services receive no slices from the
            # controller, and the slices it made before are left as they are.
            return
        service = stored.obj
        chooser = label_selector_from_object({"matchLabels": selector})
        pods = [p.obj for p in self.api.store.list(self.pods_kind.storage_key, namespace)
                if chooser.matches(p.obj["metadata"].get("labels"))]
        nodes = {n.name: n.obj for n in self.api.store.list(self.nodes_kind.storage_key, "")}
        wanted = desired_slices(service, pods, nodes)
        labels = slice_labels(service)
        # keep slices whose content is already wanted; rewrite the others, then create/delete
        unmatched = []
        wanted_keys = [_canonical(content) for content in wanted]
        for old in existing:
            current = _canonical(slice_content(old.obj))
            if current in wanted_keys and old.obj["metadata"].get("labels") == labels:
                index = wanted_keys.index(current)
                wanted_keys.pop(index)
                wanted.pop(index)
            else:
                unmatched.append(old)
        for content in wanted:
            if unmatched:
                old = unmatched.pop()
                new = copy_json(old.obj)
                new["metadata"]["labels"] = labels
                new["ports"], new["endpoints"] = content["ports"], content["endpoints"]
                await self.api.update(self.slices_kind, namespace, old.name, new)
            else:
                await self.api.create(self.slices_kind, namespace, slice_object(service, content))
        for old in unmatched:
            await self._delete(old)

    async def _delete(self, old: Stored) -> None:
        try:
            await self.api.delete(self.slices_kind, old.namespace, old.name)
        except StatusError as error:
            if error.code != 404:
                raise

    async def run(self) -> None:
        await run_together(
            watch_forever(self.api, self.services_kind, self._on_service),
            watch_forever(self.api, self.pods_kind, self._on_pod),
            watch_forever(self.api, self.slices_kind, self._on_slice),
            self.queue.run(),
        )
