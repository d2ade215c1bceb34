"""NamespaceMap → twin namespaces: created and labelled for the consumer (ownership, and the
Pod Security level of its pod policy, kept in step when its Quota changes), with a RoleBinding
of the chart's consumer ClusterRole for its identity (the Role an older enforcer made instead is
deleted); names that exist and are not ours → CreationLoopBackOff; entries
removed from the map → their namespaces deleted, and all of them when the map is deleted. kopf's
handlers in operator.py run these (its finalizer keeps a deleted map until its twins are
deleted, even when it was deleted while the enforcer was not running; it retries what failed)."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from typing import Any

from annex.controller import Controller
from annex.kubeapi import (
    JSON_PATCH,
    ApiError,
    ClusterApi,
    core_path,
    custom_path,
    group_path,
)
from remote_enforcer.consumers import Consumers
from shared.api.namespace_map import NAMESPACE_MAP, MappingPhase
from shared.forge import tenancy
from shared.forge.tenancy import RBAC_GROUP
from shared.ownership import is_owned
from shared.wellknown import REMOTE_CLUSTER_ID_LABEL, TWIN_NAMESPACE_ROLE

log = logging.getLogger(__name__)


class TwinNamespaceLabels:
    """Keeps every twin namespace at its consumer's Pod Security level: a level changed in the
    Quota, or a label changed by hand, is set again (the enforcer owns twin namespaces). Keys
    wait for the consumers' caches to be listed (a Quota not listed yet is no policy)."""

    def __init__(self, api: ClusterApi, consumers: Consumers, workers: int) -> None:
        self.api = api
        self.consumers = consumers
        self.controller: Controller[str] = Controller(
            "twin-namespace-labels", self._reconcile, workers=workers,
            synced=consumers.listed.is_set)
        self._object_counts: dict[str, dict[str, str]] = {}
        """Per twin namespace: the objectCounts its ResourceQuota was last given (no request
        for the namespace events that change nothing of it)."""

    def on_namespace(self, event_type: str, namespace: dict[str, Any]) -> None:
        if event_type == "DELETED":
            self._object_counts.pop(namespace["metadata"]["name"], None)
        if event_type != "DELETED" and self.consumers.twin_consumer(namespace) is not None:
            self.controller.add(namespace["metadata"]["name"])

    def on_quota(self, event_type: str, quota: dict[str, Any]) -> None:
        del event_type  # a deleted Quota puts its consumer back on the default policy
        consumer = (quota.get("spec") or {}).get("consumerClusterId")
        for namespace in self.consumers.twin_namespaces(str(consumer)):
            self.controller.add(namespace["metadata"]["name"])

    async def _reconcile(self, name: str) -> None:
        namespace = self.consumers.namespaces.get(("", name))
        consumer = self.consumers.twin_consumer(namespace)
        if namespace is None or consumer is None:
            return
        patch = tenancy.pod_security_labels_patch(namespace, self.consumers.pod_policy(consumer))
        if patch is not None:
            await self.api.patch(core_path("namespaces", name=name), patch)
            log.info("twin namespace %s: pod security labels set to %s", name,
                     patch["metadata"]["labels"])
        counts = dict(self.consumers.namespace_policy(consumer).object_counts)
        if self._object_counts.get(name) != counts and not namespace["metadata"].get(
                "deletionTimestamp"):
            await ensure_object_counts(self.api, name, consumer, self.consumers.cluster_id,
                                       counts)
            self._object_counts[name] = counts


async def ensure_object_counts(api: ClusterApi, namespace: str, consumer: str, provider: str,
                               counts: dict[str, str]) -> None:
    """The twin's ResourceQuota (what the consumer may store there): made, or its `hard` brought
    back to the consumer's namespacePolicy.objectCounts (a changed Quota, an edit by hand)."""
    desired = tenancy.twin_resource_quota(namespace, consumer, provider, counts)
    try:
        await api.create(core_path("resourcequotas", namespace), desired)
        return
    except ApiError as error:
        if error.status != 409:
            raise
    path = core_path("resourcequotas", namespace, tenancy.OBJECT_COUNTS_QUOTA)
    patch = tenancy.resource_quota_patch(await api.find(path) or {}, desired)
    if patch is not None:
        await api.patch(path, patch)
        log.info("twin namespace %s: object counts set to %s", namespace, counts)


class NamespaceMapper:
    """What kopf's NamespaceMap handlers do: converge a map, release a deleted one's twins."""

    def __init__(self, api: ClusterApi, cluster_id: str, consumers: Consumers,
                 consumer_cluster_role: str = TWIN_NAMESPACE_ROLE) -> None:
        self.api = api
        self.cluster_id = cluster_id
        self.consumers = consumers
        self.consumer_cluster_role = consumer_cluster_role
        self._converging: defaultdict[tuple[str, str], asyncio.Lock] = defaultdict(asyncio.Lock)
        """Per map: kopf's change handlers and its timer run apart."""

    def twin_exists(self, name: str) -> bool:
        return self.consumers.namespaces.get(("", name)) is not None

    async def _apply(self, collection: str, obj: dict[str, Any]) -> None:
        """Create the binding `obj`, or bring it back to `obj` when it differs (it is wholly
        ours): an older enforcer's binding of its Role is made again naming the ClusterRole."""
        path = f"{collection}/{obj['metadata']['name']}"
        try:
            await self.api.create(collection, obj)
        except ApiError as error:
            if error.status != 409:
                raise
            current = await self.api.find(path) or {}
            if tenancy.role_ref_changed(current, obj):
                await self.api.delete_if_exists(path)
                await self.api.create(collection, obj)
            elif (patch := tenancy.rbac_patch(current, obj)) is not None:
                await self.api.patch(path, patch)

    async def _ensure_twin(self, consumer: str, remote: str,
                           subject: dict[str, Any]) -> dict[str, Any]:
        await self.consumers.listed.wait()  # the Pod Security level is the consumer's Quota's
        existing = await self.api.find(core_path("namespaces", name=remote))
        tenant = tenancy.tenant_twin_problem(existing, remote)
        if tenant is not None:
            return tenancy.mapping_entry(remote, MappingPhase.CREATION_LOOP_BACK_OFF, tenant)
        unusable = tenancy.unusable_twin(existing, remote, consumer, self.cluster_id)
        if unusable is not None:
            return unusable
        if existing is None:
            try:
                await self.api.create(core_path("namespaces"), tenancy.twin_namespace(
                    remote, consumer, self.cluster_id, self.consumers.pod_policy(consumer)))
            except ApiError as error:
                return tenancy.mapping_entry(remote, MappingPhase.CREATION_LOOP_BACK_OFF,
                                             str(error))
        await ensure_object_counts(self.api, remote, consumer, self.cluster_id, dict(
            self.consumers.namespace_policy(consumer).object_counts))  # before any right
        await self._apply(group_path(RBAC_GROUP, "v1", "rolebindings", remote),
                          tenancy.twin_role_binding(remote, consumer, self.cluster_id, subject,
                                                    self.consumer_cluster_role))
        await self._delete_legacy_role(consumer, remote)
        return tenancy.mapping_entry(remote, MappingPhase.ACCEPTED)

    async def _delete_legacy_role(self, consumer: str, namespace: str) -> None:
        """The Role an older enforcer granted the consumer's rights with (ours by its labels),
        unbound once the binding names the ClusterRole."""
        path = group_path(RBAC_GROUP, "v1", "roles", namespace, TWIN_NAMESPACE_ROLE)
        role = await self.api.find(path)
        if role is not None and is_owned(role, consumer, self.cluster_id):
            await self.api.delete_if_exists(path)
            log.info("twin namespace %s: deleted the Role %s an older enforcer made",
                     namespace, TWIN_NAMESPACE_ROLE)

    async def _refused(self, consumer: str, desired: dict[str, str]
                       ) -> dict[str, dict[str, Any]]:
        """The entries of `desired` the consumer's namespace policy refuses (names, the cap),
        counting its twins of other maps."""
        await self.consumers.listed.wait()
        ours = {ns["metadata"]["name"] for ns in self.consumers.twin_namespaces(consumer)}
        return tenancy.refused_twins(desired, consumer, self.consumers.namespace_policy(consumer),
                                     ours.__contains__, len(ours - set(desired.values())))

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

    async def converge(self, namespace: str, name: str) -> dict[str, Any] | None:
        """Make the twin namespaces the map wants, delete those it no longer wants, record
        status.currentMapping; the mapping recorded, or None when the map is not in a tenant
        namespace. Read afresh: the status kopf's event carries may predate our last write."""
        async with self._converging[(namespace, name)]:
            return await self._converge(namespace, name)

    async def _converge(self, namespace: str, name: str) -> dict[str, Any] | None:
        namespace_map = await self.api.find(custom_path(NAMESPACE_MAP, namespace, name))
        if namespace_map is None or namespace_map["metadata"].get("deletionTimestamp"):
            return {}  # gone, or going: the delete handler releases its twins
        found = await self._consumer(namespace)
        if found is None:
            return None
        tenant, consumer = found
        desired = dict((namespace_map.get("spec") or {}).get("desiredMapping") or {})
        current = dict((namespace_map.get("status") or {}).get("currentMapping") or {})
        mapping: dict[str, Any] = {}
        subject = tenancy.consumer_subject(tenant)
        refused = await self._refused(consumer, desired)
        for home, remote in sorted(desired.items()):
            mapping[home] = refused.get(home) or await self._ensure_twin(consumer, remote,
                                                                         subject)
        for remote in tenancy.retired_twins(desired, current):
            await self._delete_twin(consumer, remote)
        if mapping != current:
            await self.api.patch(
                custom_path(NAMESPACE_MAP, namespace, name, "status"),
                [{"op": "add", "path": "/status",
                  "value": {**(namespace_map.get("status") or {}), "currentMapping": mapping}}],
                JSON_PATCH)
        return mapping

    async def release(self, namespace: str, name: str) -> None:
        """Delete the twin namespaces a deleted map recorded (never one it could not make)."""
        self._converging.pop((namespace, name), None)
        namespace_map = await self.api.find(custom_path(NAMESPACE_MAP, namespace, name))
        found = await self._consumer(namespace)
        if namespace_map is None or found is None:
            return
        current = dict((namespace_map.get("status") or {}).get("currentMapping") or {})
        for remote in tenancy.retired_twins({}, current):
            await self._delete_twin(found[1], remote)
