"""NamespaceMap → twin namespaces: created and labelled for the consumer (ownership, and the
Pod Security level of its pod policy, kept in step when its Quota changes), with a Role and
RoleBinding for its identity; names that exist and are not ours → CreationLoopBackOff; entries
removed from the map → their namespaces deleted. The enforcer's finalizer on each map keeps a
deleted map until its twin namespaces are deleted, even when it was deleted while the enforcer
was not running."""

from __future__ import annotations

import logging
from typing import Any

from annex.controller import Controller
from annex.kubeapi import ApiError, ClusterApi, core_path, custom_path, group_path, retrying
from annex.mirror import Key
from remote_enforcer.consumers import Consumers
from remote_enforcer.rbac import TWIN_NAMESPACE_RULES
from shared.api.namespace_map import NAMESPACE_MAP, MappingPhase
from shared.ownership import is_owned, ownership_labels
from shared.pod_policy import twin_namespace_labels
from shared.wellknown import (
    CONSUMER_IDENTITY_ANNOTATION,
    CONSUMER_SERVICE_ACCOUNT,
    REMOTE_CLUSTER_ID_LABEL,
    TWIN_NAMESPACE_ROLE,
    TWIN_NAMESPACES_FINALIZER,
)

log = logging.getLogger(__name__)
RBAC = "rbac.authorization.k8s.io"
JSON_PATCH = "application/json-patch+json"


def consumer_subject(tenant_namespace: dict[str, Any]) -> dict[str, Any]:
    """The RBAC subject of the consumer identity a tenant namespace declares."""
    meta = tenant_namespace["metadata"]
    identity = (meta.get("annotations") or {}).get(CONSUMER_IDENTITY_ANNOTATION) or (
        f"serviceaccount:{CONSUMER_SERVICE_ACCOUNT}")
    kind, _, name = identity.partition(":")
    if kind.lower() == "user":
        return {"kind": "User", "apiGroup": RBAC, "name": name}
    return {"kind": "ServiceAccount", "name": name, "namespace": meta["name"]}


def role(namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": f"{RBAC}/v1", "kind": "Role",
            "metadata": {"name": TWIN_NAMESPACE_ROLE, "namespace": namespace, "labels": labels},
            "rules": TWIN_NAMESPACE_RULES}


def role_binding(namespace: str, labels: dict[str, str],
                 subject: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{RBAC}/v1", "kind": "RoleBinding",
            "metadata": {"name": TWIN_NAMESPACE_ROLE, "namespace": namespace, "labels": labels},
            "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": TWIN_NAMESPACE_ROLE},
            "subjects": [subject]}


def pod_security_labels_patch(namespace: dict[str, Any], consumers: Consumers
                              ) -> dict[str, Any] | None:
    """The merge patch bringing a twin namespace's Pod Security labels to its consumer's
    policy, or None when they match (or it is no twin namespace of ours)."""
    consumer = consumers.twin_consumer(namespace)
    if consumer is None or namespace["metadata"].get("deletionTimestamp"):
        return None
    labels = namespace["metadata"].get("labels") or {}
    desired = twin_namespace_labels(consumers.pod_policy(consumer))
    changed = {k: v for k, v in desired.items() if labels.get(k) != v}
    return {"metadata": {"labels": changed}} if changed else None


class TwinNamespaceLabels:
    """Keeps every twin namespace at its consumer's Pod Security level: a level changed in the
    Quota, or a label changed by hand, is set again (the enforcer owns twin namespaces). Keys
    wait for the consumers' caches to be listed (a Quota not listed yet is no policy)."""

    def __init__(self, api: ClusterApi, consumers: Consumers, workers: int) -> None:
        self.api = api
        self.consumers = consumers
        self.controller: Controller[str] = Controller(
            "twin-namespace-labels", self._reconcile, workers=workers,
            ready=lambda _: consumers.listed.is_set())

    def on_namespace(self, event_type: str, namespace: dict[str, Any]) -> None:
        if event_type != "DELETED" and self.consumers.twin_consumer(namespace) is not None:
            self.controller.add(namespace["metadata"]["name"])

    def on_quota(self, event_type: str, quota: dict[str, Any]) -> None:
        del event_type  # a deleted Quota puts its consumer back on the default policy
        consumer = (quota.get("spec") or {}).get("consumerClusterId")
        for namespace in self.consumers.twin_namespaces(str(consumer)):
            self.controller.add(namespace["metadata"]["name"])

    async def _reconcile(self, name: str) -> None:
        key: Key = ("", name)
        namespace = self.consumers.namespaces.get(key)
        patch = None if namespace is None else pod_security_labels_patch(namespace,
                                                                          self.consumers)
        if patch is not None:
            await self.api.patch(core_path("namespaces", name=name), patch)
            log.info("twin namespace %s: pod security labels set to %s", name,
                     patch["metadata"]["labels"])


class NamespaceMapper:
    def __init__(self, api: ClusterApi, cluster_id: str, consumers: Consumers) -> None:
        self.api = api
        self.cluster_id = cluster_id
        self.consumers = consumers

    async def _apply(self, collection: str, obj: dict[str, Any]) -> None:
        """Create, or replace when it differs (roles and bindings are wholly ours)."""
        try:
            await self.api.create(collection, obj)
        except ApiError as error:
            if error.status != 409:
                raise
            current = await self.api.find(f"{collection}/{obj['metadata']['name']}") or {}
            if any(current.get(k) != obj[k] for k in ("rules", "roleRef", "subjects") if k in obj):
                if "roleRef" in obj and current.get("roleRef") != obj["roleRef"]:
                    await self.api.delete_if_exists(f"{collection}/{obj['metadata']['name']}")
                    await self.api.create(collection, obj)
                else:
                    await self.api.patch(f"{collection}/{obj['metadata']['name']}",
                                         {k: obj[k] for k in ("rules", "subjects") if k in obj})

    async def _ensure_twin(self, consumer: str, remote: str,
                           subject: dict[str, Any]) -> dict[str, Any]:
        labels = ownership_labels(consumer, self.cluster_id)
        await self.consumers.listed.wait()  # the Pod Security level is the consumer's Quota's
        existing = await self.api.find(core_path("namespaces", name=remote))
        if existing is not None and not is_owned(existing, consumer, self.cluster_id):
            return {"remoteNamespace": remote, "phase": MappingPhase.CREATION_LOOP_BACK_OFF.value,
                    "message": f"namespace {remote!r} already exists and is not managed by "
                               f"annex for consumer {consumer!r}"}
        if existing is not None and existing["metadata"].get("deletionTimestamp"):
            return {"remoteNamespace": remote, "phase": MappingPhase.TERMINATING.value}
        if existing is None:
            try:
                # Labelled from the start: no pod of the consumer ever runs in it unchecked.
                await self.api.create(core_path("namespaces"), {"metadata": {
                    "name": remote, "labels": {**labels, **twin_namespace_labels(
                        self.consumers.pod_policy(consumer))}}})
            except ApiError as error:
                return {"remoteNamespace": remote,
                        "phase": MappingPhase.CREATION_LOOP_BACK_OFF.value,
                        "message": str(error)}
        await self._apply(group_path(RBAC, "v1", "roles", remote), role(remote, labels))
        await self._apply(group_path(RBAC, "v1", "rolebindings", remote),
                          role_binding(remote, labels, subject))
        return {"remoteNamespace": remote, "phase": MappingPhase.ACCEPTED.value}

    async def _consumer(self, tenant_namespace: str) -> tuple[dict[str, Any], str] | None:
        tenant = await self.api.find(core_path("namespaces", name=tenant_namespace))
        consumer = (((tenant or {}).get("metadata") or {}).get("labels") or {}).get(
            REMOTE_CLUSTER_ID_LABEL)
        return (tenant, consumer) if tenant is not None and consumer else None

    async def _delete_twin(self, consumer: str, remote: str) -> None:
        existing = await self.api.find(core_path("namespaces", name=remote))
        if existing is not None and is_owned(existing, consumer, self.cluster_id):
            await self.api.delete_if_exists(core_path("namespaces", name=remote))
            log.info("deleted twin namespace %s of consumer %s", remote, consumer)

    async def reconcile(self, namespace_map: dict[str, Any]) -> None:
        # kopf does not retry event handlers: this is the map's only retry (a finalizer write
        # that met a newer version, 409, runs again from a fresh read).
        meta = namespace_map["metadata"]
        await retrying(lambda: self._reconcile(meta["namespace"], meta["name"]))

    async def _reconcile(self, namespace: str, name: str) -> None:
        namespace_map = await self.api.find(custom_path(NAMESPACE_MAP, namespace, name))
        if namespace_map is None:
            return
        meta = namespace_map["metadata"]
        found = await self._consumer(meta["namespace"])
        if found is None:
            log.warning("NamespaceMap %s/%s is not in a tenant namespace (no %s label): ignored",
                        meta["namespace"], meta["name"], REMOTE_CLUSTER_ID_LABEL)
            return
        tenant, consumer = found
        deleting = bool(meta.get("deletionTimestamp"))
        finalizers = list(meta.get("finalizers") or [])
        if not deleting and TWIN_NAMESPACES_FINALIZER not in finalizers:
            # Before any twin exists: a map deleted from now on waits for us to delete them.
            await self._set_finalizers(meta, [*finalizers, TWIN_NAMESPACES_FINALIZER])
        desired = {} if deleting else dict((namespace_map.get("spec") or {}).get(
            "desiredMapping") or {})
        current = dict((namespace_map.get("status") or {}).get("currentMapping") or {})
        mapping: dict[str, Any] = {}
        subject = consumer_subject(tenant)
        for home, remote in sorted(desired.items()):
            mapping[home] = await self._ensure_twin(consumer, remote, subject)
        for home, entry in current.items():
            remote = entry.get("remoteNamespace")
            if desired.get(home) == remote or remote in desired.values():
                continue
            if entry.get("phase") == MappingPhase.CREATION_LOOP_BACK_OFF.value:
                continue  # never ours
            await self._delete_twin(consumer, remote)
        if deleting:
            if TWIN_NAMESPACES_FINALIZER in finalizers:
                await self._set_finalizers(
                    meta, [f for f in finalizers if f != TWIN_NAMESPACES_FINALIZER])
            return
        if mapping != current:
            await self.api.patch(
                custom_path(NAMESPACE_MAP, meta["namespace"], meta["name"], "status"),
                [{"op": "add", "path": "/status",
                  "value": {**(namespace_map.get("status") or {}), "currentMapping": mapping}}],
                JSON_PATCH)

    async def _set_finalizers(self, meta: dict[str, Any], finalizers: list[str]) -> None:
        """Replace the map's finalizers; the resourceVersion makes a concurrent change a 409
        (retried from a fresh read) rather than a lost finalizer."""
        await self.api.patch(
            custom_path(NAMESPACE_MAP, meta["namespace"], meta["name"]),
            {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}})
