"""NamespaceMap → twin namespaces: created and labelled for the consumer (ownership, and the
Pod Security level of its pod policy, kept in step when its Quota changes), with a RoleBinding
of the chart's consumer ClusterRole for its identity (the Role an older enforcer made instead is
deleted); names that exist and are not ours → CreationLoopBackOff; entries removed from the map
→ their namespaces deleted, and all of them when the map is deleted.

NamespaceMaps reconcile on the runtime (`annex.controller`), level-triggered: a map is looked at
when it changes, when a namespace it names (or its tenant namespace) changes, and when its
consumer's Quota changes: a name somebody else held is taken once that namespace is gone, a twin
deleted behind the enforcer's back is made again once it is gone, a narrowed namespace policy
is applied. The finalizer `offloading.liqo.io/twin-namespaces` (the name every earlier version
put on the maps, kopf's included) is set before the first twin is made and removed once a
deleted map's twins are deleted: a map deleted while the enforcer is away takes its twins when
it is back."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from annex.api_errors import ApiError
from annex.api_paths import core_path, custom_path, group_path
from annex.controller import DONE, Controller, Result
from annex.informers import Change
from annex.kubeapi import JSON_PATCH, ClusterApi
from annex.mirror import Key, Mirror
from annex.writes import Foreign, create_or_refuse
from remote_enforcer.consumers import Consumers
from shared.api.namespace_map import NAMESPACE_MAP, MappingPhase
from shared.forge import tenancy
from shared.forge.tenancy import RBAC_GROUP
from shared.ownership import is_owned
from shared.wellknown import (
    REMOTE_CLUSTER_ID_LABEL,
    TWIN_NAMESPACE_ROLE,
    TWIN_NAMESPACES_FINALIZER,
)

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

    def on_namespace(self, change: Change) -> None:
        if change.deleted:
            self._object_counts.pop(change.key[1], None)
        elif self.consumers.twin_consumer(change.obj) is not None:
            self.controller.add(change.key[1])

    def on_quota(self, change: Change) -> None:
        """A Quota changed (deleted: its consumer is back on the default policy)."""
        consumer = (change.obj.get("spec") or {}).get("consumerClusterId")
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


def _ours(_: object) -> bool:
    """What a twin namespace holds under the names the enforcer gives is the enforcer's: the
    consumer may write neither RoleBindings nor ResourceQuotas there."""
    return True


async def made_or_found(api: ClusterApi, collection: str, desired: dict[str, Any]
                        ) -> dict[str, Any] | None:
    """None once `desired` is made in `collection`; the object of its name when there is one
    already (read first: one that is as it should be costs no write)."""
    path = f"{collection}/{desired['metadata']['name']}"
    current = await api.find(path)
    if current is not None:
        return dict(current)
    found, created = await create_or_refuse(api, collection, path, desired, _ours)
    return None if created else dict(found)


async def ensure_object_counts(api: ClusterApi, namespace: str, consumer: str, provider: str,
                               counts: dict[str, str]) -> None:
    """The twin's ResourceQuota (what the consumer may store there): made, or its `hard` brought
    back to the consumer's namespacePolicy.objectCounts (a changed Quota, an edit by hand)."""
    desired = tenancy.twin_resource_quota(namespace, consumer, provider, counts)
    current = await made_or_found(api, core_path("resourcequotas", namespace), desired)
    if current is None:
        return
    path = core_path("resourcequotas", namespace, tenancy.OBJECT_COUNTS_QUOTA)
    patch = tenancy.resource_quota_patch(current, desired)
    if patch is not None:
        await api.patch(path, patch)
        log.info("twin namespace %s: object counts set to %s", namespace, counts)


class NamespaceMapper:
    """What a NamespaceMap's reconcile does: converge a map, release a deleted one's twins."""

    def __init__(self, api: ClusterApi, cluster_id: str, consumers: Consumers,
                 consumer_cluster_role: str = TWIN_NAMESPACE_ROLE) -> None:
        self.api = api
        self.cluster_id = cluster_id
        self.consumers = consumers
        self.consumer_cluster_role = consumer_cluster_role

    async def _apply(self, collection: str, obj: dict[str, Any]) -> None:
        """Create the binding `obj`, or bring it back to `obj` when it differs (it is wholly
        ours): an older enforcer's binding of its Role is made again naming the ClusterRole."""
        current = await made_or_found(self.api, collection, obj)
        if current is None:
            return
        path = f"{collection}/{obj['metadata']['name']}"
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
                await create_or_refuse(
                    self.api, core_path("namespaces"), core_path("namespaces", name=remote),
                    tenancy.twin_namespace(remote, consumer, self.cluster_id,
                                           self.consumers.pod_policy(consumer)),
                    lambda made: tenancy.unusable_twin(made, remote, consumer,
                                                       self.cluster_id) is None)
            except Foreign as foreign:  # made meanwhile, by somebody else (or going)
                return tenancy.unusable_twin(foreign.existing, remote, consumer,
                                             self.cluster_id) or tenancy.mapping_entry(
                    remote, MappingPhase.CREATION_LOOP_BACK_OFF, str(foreign))
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
        """Make the twin namespaces the map wants (the finalizer set first), delete those it no
        longer wants, record status.currentMapping; the mapping recorded, or None when the map
        is not in a tenant namespace. Read afresh: the mirror may not hold our last status
        write yet."""
        namespace_map = await self.api.find(custom_path(NAMESPACE_MAP, namespace, name))
        if namespace_map is None or namespace_map["metadata"].get("deletionTimestamp"):
            return {}  # gone, or going: the reconcile of its deletion releases its twins
        found = await self._consumer(namespace)
        if found is None:
            return None
        tenant, consumer = found
        if TWIN_NAMESPACES_FINALIZER not in (namespace_map["metadata"].get("finalizers") or []):
            namespace_map = await self._set_finalizer(namespace_map, present=True)
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

    async def _set_finalizer(self, namespace_map: dict[str, Any], present: bool
                             ) -> dict[str, Any]:
        """The map with the enforcer's finalizer set or removed (others' stay: the write is
        conditional on the version read); the map as written."""
        meta = namespace_map["metadata"]
        finalizers = [f for f in meta.get("finalizers") or [] if f != TWIN_NAMESPACES_FINALIZER]
        if present:
            finalizers.append(TWIN_NAMESPACES_FINALIZER)
        written: dict[str, Any] = await self.api.patch(
            custom_path(NAMESPACE_MAP, meta["namespace"], meta["name"]),
            {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}})
        return written

    async def release(self, namespace: str, name: str) -> None:
        """A deleted map: delete the twin namespaces it recorded (never one it could not
        make), then let the map go (the finalizer removed)."""
        namespace_map = await self.api.find(custom_path(NAMESPACE_MAP, namespace, name))
        if namespace_map is None or TWIN_NAMESPACES_FINALIZER not in (
                namespace_map["metadata"].get("finalizers") or []):
            return
        found = await self._consumer(namespace)
        if found is not None:
            current = dict((namespace_map.get("status") or {}).get("currentMapping") or {})
            for remote in tenancy.retired_twins({}, current):
                await self._delete_twin(found[1], remote)
        await self._set_finalizer(namespace_map, present=False)
        log.info("NamespaceMap %s/%s released", namespace, name)


class NamespaceMaps:
    """The NamespaceMap controller. Keys: maps. Reads the maps' mirror and the consumers' view;
    fed by the routes of maps (`on_map`), namespaces (`on_namespace`) and Quotas
    (`on_quota`)."""

    def __init__(self, mapper: NamespaceMapper, maps: Mirror, workers: int) -> None:
        self.mapper = mapper
        self.maps = maps
        self.consumers = mapper.consumers
        self._not_tenant: set[str] = set()
        """Uids of maps found outside a tenant namespace, said once."""
        self.listed = asyncio.Event()
        """Set once the maps' mirror holds its first list."""
        self.controller: Controller[Key] = Controller(
            "namespacemaps", self._reconcile, workers=workers,
            synced=lambda: self.consumers.listed.is_set() and self.listed.is_set())

    def on_map(self, change: Change) -> None:
        self.controller.add(change.key)

    def on_namespace(self, change: Change) -> None:
        """A namespace a map names (made, changed, terminating, gone), or a tenant namespace
        (its labels say whose it is)."""
        name = change.key[1]
        for key in self.maps.keys():
            namespace_map = self.maps.get(key) or {}
            if key[0] == name or name in tenancy.named_twins(
                    (namespace_map.get("spec") or {}).get("desiredMapping") or {},
                    (namespace_map.get("status") or {}).get("currentMapping") or {}):
                self.controller.add(key)

    def on_quota(self, change: Change) -> None:
        """The consumer's namespace policy (names allowed, how many twins) may have changed."""
        consumer = (change.obj.get("spec") or {}).get("consumerClusterId")
        for key in self.maps.keys():
            tenant = self.consumers.namespaces.get(("", key[0]))
            labels = ((tenant or {}).get("metadata") or {}).get("labels") or {}
            if consumer and labels.get(REMOTE_CLUSTER_ID_LABEL) == consumer:
                self.controller.add(key)

    async def _reconcile(self, key: Key) -> Result:
        namespace_map = self.maps.get(key)
        if namespace_map is None:
            return DONE
        meta = namespace_map["metadata"]
        if meta.get("deletionTimestamp"):
            await self.mapper.release(*key)
            return DONE
        if await self.mapper.converge(*key) is None and meta.get("uid") not in self._not_tenant:
            self._not_tenant.add(str(meta.get("uid")))
            log.warning("NamespaceMap %s/%s ignored: namespace %s is not a tenant namespace (no "
                        "%s label)", *key, key[0], REMOTE_CLUSTER_ID_LABEL)
        return DONE
