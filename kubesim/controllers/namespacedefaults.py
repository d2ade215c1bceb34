"""What every active namespace gets: the `kube-root-ca.crt` ConfigMap (root-ca-cert-publisher)
and the `default` ServiceAccount (serviceaccount controller); both are recreated if deleted and
the ConfigMap is put back if its content drifts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubesim.apiserver import ApiServer, copy_json
from kubesim.controllers.base import (
    Controller,
    WorkQueue,
    kind_of,
    run_together,
    watch_forever,
)
from kubesim.errors import StatusError
from kubesim.kinds import ResourceKind
from kubesim.store import Stored

ROOT_CA_NAME = "kube-root-ca.crt"
ROOT_CA_DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters."
)


def root_ca_configmap(ca_pem: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": ROOT_CA_NAME,
                         "annotations": {"kubernetes.io/description": ROOT_CA_DESCRIPTION}},
            "data": {"ca.crt": ca_pem}}


def default_service_account() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}


class _PerNamespaceObject(Controller):
    """Keeps one named object of one kind in every namespace that is not terminating."""

    object_name = ""

    def __init__(self, api: ApiServer, kind: ResourceKind) -> None:
        super().__init__(api)
        self.kind = kind
        self.namespaces_kind = kind_of(api, "", "v1", "namespaces")
        self.queue = WorkQueue(self._reconcile, self.name)

    def desired(self) -> dict[str, Any] | None:
        raise NotImplementedError

    def drifted(self, current: dict[str, Any], desired: dict[str, Any]) -> bool:
        return False

    def _on_namespace(self, event_type: str, stored: Stored) -> None:
        if event_type != "DELETED":
            self.queue.add(stored.name)

    def _on_object(self, event_type: str, stored: Stored) -> None:
        if stored.name == self.object_name:
            self.queue.add(stored.namespace)

    async def _reconcile(self, namespace: str) -> None:
        stored_ns = self.api.store.get(self.namespaces_kind.storage_key, "", namespace)
        if stored_ns is None or stored_ns.obj["metadata"].get("deletionTimestamp"):
            return
        desired = self.desired()
        if desired is None:  # not known yet (the cluster's CA is made while it starts)
            self.queue.add_later(namespace, 0.05)
            return
        current = self.api.store.get(self.kind.storage_key, namespace, self.object_name)
        try:
            if current is None:
                await self.api.create(self.kind, namespace, desired)
            elif self.drifted(current.obj, desired):
                new = copy_json(current.obj)
                new.update({k: v for k, v in desired.items() if k not in ("metadata",)})
                await self.api.update(self.kind, namespace, self.object_name, new)
        except StatusError as error:
            # 409: created meanwhile; 403/404: the namespace started terminating
            if error.code not in (403, 404, 409):
                raise

    async def run(self) -> None:
        await run_together(
            watch_forever(self.api, self.namespaces_kind, self._on_namespace),
            watch_forever(self.api, self.kind, self._on_object,
                          field_selector=f"metadata.name={self.object_name}"),
            self.queue.run(),
        )


class RootCaPublisher(_PerNamespaceObject):
    name = "root-ca-cert-publisher"
    object_name = ROOT_CA_NAME

    def __init__(self, api: ApiServer, ca_pem: Callable[[], str | None]) -> None:
        super().__init__(api, kind_of(api, "", "v1", "configmaps"))
        self._ca_pem = ca_pem

    def desired(self) -> dict[str, Any] | None:
        pem = self._ca_pem()
        return root_ca_configmap(pem) if pem else None

    def drifted(self, current: dict[str, Any], desired: dict[str, Any]) -> bool:
        return bool(current.get("data") != desired["data"])


class DefaultServiceAccount(_PerNamespaceObject):
    name = "serviceaccount"
    object_name = "default"

    def __init__(self, api: ApiServer) -> None:
        super().__init__(api, kind_of(api, "", "v1", "serviceaccounts"))

    def desired(self) -> dict[str, Any]:
        return default_service_account()
