"""ShadowPod enforcement: each ShadowPod has its pod, recreated at once when deleted, never
again once terminal; the pod's status is copied into the ShadowPod (written only on change). A
pod the API server refuses (quota, policy, invalid spec) is recorded in the ShadowPod status
(condition `PodCreated` False, for the home pod to show) and tried again with backoff, and at
once when its namespace or its consumer's Quota changes: a loosened policy reaches the twin
namespace's Pod Security labels after the consumer may already offload under it, and the API
server judges a pod by the labels of the moment it is created.

A reconcile gathers what the decision reads (`gather`: the mirrors of the enforcer's informer
registry, no read per event, once both hold their first list, the controller's sync gate),
decides with one pure function (`shared.forge.shadowpod_plan`) and carries out its plan
(`carry_out`). One reconcile per (namespace,
name) at a time, on annex.controller; events for a key being reconciled make it run once more
afterwards.
Writes made from a cache that may lag are guarded: the ShadowPod status is written only over the
version it was computed from (a stale cache gets 409 and the newer version's event reconciles
again), and a pod seen gone is made again only after a live read of its ShadowPod (the plan
asks for it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from annex.api_errors import ApiError
from annex.api_paths import core_path, custom_path
from annex.controller import DONE, Controller, Result
from annex.events import EventRecorder
from annex.informers import Change
from annex.kubeapi import JSON_PATCH, STRATEGIC_MERGE_PATCH, ClusterApi
from annex.mirror import Key, Mirror
from annex.retries import RETRIED_STATUSES
from annex.writes import Foreign, create_or_refuse
from remote_enforcer import ephemeral
from remote_enforcer.consumers import Consumers
from remote_enforcer.metrics import Metrics
from shared.api.shadowpod import SHADOWPOD
from shared.forge import enforcement
from shared.forge.shadowpod_plan import (
    AddEphemeralContainers,
    CreatePod,
    LookUpNamespace,
    PatchPod,
    ReadShadowPod,
    RecordEvent,
    RecordRecreation,
    ReportForeignPod,
    ShadowPodInputs,
    ShadowPodPlan,
    WriteStatus,
    created_pod,
    foreign_pod,
    refused_pod,
    shadowpod_plan,
)
from shared.pools import Pool
from shared.wellknown import (
    FAILED_REFLECTION_REASON,
    ORIGIN_CLUSTER_LABEL,
    REMOTE_ENFORCER_COMPONENT,
    TRACEPARENT_ANNOTATION,
)

log = logging.getLogger(__name__)

REFUSED = Result(retry=True, outcome="refused")
"""The pod was not made (the provider's policy, or the API server refused it): recorded on the
ShadowPod, and tried again with backoff (a quota may free up, a policy loosen)."""


def shadowpod_path(namespace: str, name: str = "", subresource: str = "") -> str:
    return custom_path(SHADOWPOD, namespace, name, subresource)


def pod_path(namespace: str, name: str = "") -> str:
    return core_path("pods", namespace, name)


class ShadowPodEnforcer:
    """Fed by the routes of pods and ShadowPods (`on_pod`, `on_shadowpod`); `pods` is the
    mirror of the pods ShadowPods make (origin-labelled), `shadowpods` of every ShadowPod."""

    def __init__(self, api: ClusterApi, metrics: Metrics, consumers: Consumers,
                 workers: int, pods: Mirror, shadowpods: Mirror,
                 pools: Sequence[Pool] = ()) -> None:
        self.api = api
        self.pools = tuple(pools)
        """The provider's pools (`--offer-pool`): a pod runs on its ShadowPod's pool's nodes."""
        self.metrics = metrics
        self.consumers = consumers
        self.events = EventRecorder(api, REMOTE_ENFORCER_COMPONENT)
        self.pods = pods
        self.shadowpods = shadowpods
        # uid -> what the pod follows, as last reconciled: a ShadowPod event that changes only
        # the status (most of them: the enforcer's own writes) needs no reconcile.
        self._followed: dict[str, tuple[Any, ...]] = {}
        # The final state of pods just deleted: a terminal phase in it is recorded first.
        self._deleted_pods: dict[Key, dict[str, Any]] = {}
        # Keys whose status write met a newer version than the cache held: that version's
        # event reconciles them, even if it changed nothing the pod follows.
        self._outdated: set[Key] = set()
        # Namespace -> keys of ShadowPods whose pod was refused (by the API server or this
        # enforcer's policy): tried again at once when the namespace or the Quota changes.
        self._refused: dict[str, set[Key]] = {}
        self.listed = asyncio.Event()
        """Set once both caches hold their first list: nothing is decided from a cache still
        filling (a pod not listed yet is not a pod to create)."""
        self.controller: Controller[Key] = Controller(
            "shadowpods", self._reconcile, workers=workers,
            synced=self.listed.is_set, traceparent=self._traceparent)

    def _traceparent(self, key: Key) -> object:
        """The W3C traceparent the consumer's agent wrote on the ShadowPod: untrusted, only a
        parent span context once `annex.tracing` has checked its form."""
        shadowpod = self.shadowpods.get(key)
        if shadowpod is None:
            return None
        return (shadowpod["metadata"].get("annotations") or {}).get(TRACEPARENT_ANNOTATION)

    def on_pod(self, change: Change) -> None:
        if ORIGIN_CLUSTER_LABEL not in (change.obj["metadata"].get("labels") or {}):
            return  # not a ShadowPod's
        if change.deleted:
            self._deleted_pods[change.key] = change.obj
        self.controller.add(change.key)

    def on_shadowpod(self, change: Change) -> None:
        key, shadowpod = change.key, change.obj
        uid = str(shadowpod["metadata"].get("uid", ""))
        if change.deleted:
            self._followed.pop(uid, None)
            self._outdated.discard(key)
            self._forget_refusal(key)
            return
        followed = enforcement.followed_fields(shadowpod)
        if self._followed.get(uid) == followed and key not in self._outdated:
            return
        self._outdated.discard(key)
        self._followed[uid] = followed
        self.controller.add(key)

    def on_namespace(self, change: Change) -> None:
        """A namespace changed (its Pod Security labels, say): its refused pods are tried again
        now, whatever their backoff."""
        if not change.deleted:
            self._retry_refused(change.key[1])

    def on_quota(self, change: Change) -> None:
        """A consumer's Quota changed (its pod policy, its limits): the refused pods of its twin
        namespaces are tried again now (a deleted Quota puts its consumer back on the default
        policy)."""
        consumer = str((change.obj.get("spec") or {}).get("consumerClusterId"))
        for namespace in self.consumers.twin_namespaces(consumer):
            self._retry_refused(str(namespace["metadata"]["name"]))

    def _retry_refused(self, namespace: str) -> None:
        for key in self._refused.get(namespace, ()):
            self.controller.add(key)

    def _note_refusal(self, key: Key) -> None:
        self._refused.setdefault(key[0], set()).add(key)

    def _forget_refusal(self, key: Key) -> None:
        keys = self._refused.get(key[0])
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._refused[key[0]]

    async def write_status(self, shadowpod: Mapping[str, Any], status: dict[str, Any]) -> bool:
        """Replace the status of exactly this version of the ShadowPod; False when it has
        changed since (its event brings the newer version to reconcile)."""
        # JSON patch "add" replaces the whole status: a merge patch would keep stale keys of
        # the previous podStatus. The resourceVersion makes it conditional (409 when stale).
        meta = shadowpod["metadata"]
        key, version = (meta["namespace"], meta["name"]), meta["resourceVersion"]
        try:
            await self.api.patch(
                shadowpod_path(*key, "status"),
                [{"op": "replace", "path": "/metadata/resourceVersion", "value": version},
                 {"op": "add", "path": "/status", "value": status}], JSON_PATCH)
        except ApiError as error:
            if error.status == 404:
                return False
            if error.status != 409:
                raise
            cached = self.shadowpods.get(key)
            if cached is not None and cached["metadata"]["resourceVersion"] != version:
                self.controller.add(key)  # the newer version arrived meanwhile
            else:
                self._outdated.add(key)
            return False
        return True

    async def _reconcile(self, key: Key) -> Result:
        self._forget_refusal(key)  # refused again, it is noted again
        inputs = self.gather(key)
        return await self.carry_out(key, inputs, shadowpod_plan(inputs))

    # --- gathering --------------------------------------------------------------------------

    def gather(self, key: Key) -> ShadowPodInputs:
        """What the decision on the ShadowPod `key` reads, as the mirrors hold it now; the final
        state of its pod just deleted is taken (the plan decides on it)."""
        return ShadowPodInputs(shadowpod=self.shadowpods.get(key), pod=self.pods.get(key),
                               now=datetime.now(UTC), pools=self.pools,
                               deleted_pod=self._deleted_pods.pop(key, None))

    async def _read(self, key: Key, inputs: ShadowPodInputs,
                    step: ReadShadowPod | LookUpNamespace) -> ShadowPodInputs:
        if isinstance(step, ReadShadowPod):
            fresh = await self.api.find(shadowpod_path(*key))
            return replace(inputs, shadowpod=fresh, shadowpod_read=True)
        namespace = (self.consumers.namespaces.get(("", key[0]))
                     or await self.api.find(core_path("namespaces", name=key[0])))
        consumer = self.consumers.twin_consumer(namespace)
        lent = None if consumer is None else self.consumers.lent_pools(consumer)
        return replace(inputs, namespace_looked_up=True, namespace=namespace, consumer=consumer,
                       pod_policy=None if consumer is None else self.consumers.pod_policy(consumer),
                       lent_pools=None if lent is None else tuple(lent))

    # --- carrying out -----------------------------------------------------------------------

    async def carry_out(self, key: Key, inputs: ShadowPodInputs, plan: ShadowPodPlan) -> Result:
        """The plan's steps in order; a read decides again with what it read; a final status
        the ShadowPod has moved past ends the plan."""
        for step in plan.steps:
            match step:
                case ReadShadowPod() | LookUpNamespace():
                    inputs = await self._read(key, inputs, step)
                    return await self.carry_out(key, inputs, shadowpod_plan(inputs))
                case WriteStatus():
                    if not await self.write_status(step.shadowpod, step.status) and step.final:
                        if inputs.deleted_pod is not None:  # again, on the newer version
                            self._deleted_pods.setdefault(key, dict(inputs.deleted_pod))
                        return DONE
                case RecordEvent():
                    await self.events.record(step.shadowpod, step.reason, step.message)
                case ReportForeignPod():
                    log.warning("%s: left alone", step.message)
                    await self.events.record(step.shadowpod, FAILED_REFLECTION_REASON,
                                             step.message)
                case CreatePod():
                    return await self._create_pod(key, inputs, step)
                case RecordRecreation():
                    await self._record_recreation(step)
                case PatchPod():
                    await self.api.patch(pod_path(*key), step.patch, STRATEGIC_MERGE_PATCH)
                case AddEphemeralContainers():
                    await ephemeral.add(self.api, self.events, step.pod, step.patch)
        if plan.refused is not None:
            log.error("pod %s/%s not made: %s", *key, plan.refused)
            self._note_refusal(key)
            return REFUSED
        return DONE

    async def _create_pod(self, key: Key, inputs: ShadowPodInputs, step: CreatePod) -> Result:
        """Make the pod; what the API server answers decides what follows."""
        namespace, name = key
        try:
            # Made meanwhile (by a previous run: its event reconciles), or not ours (the mirror
            # holds only pods with an origin label).
            _, created = await create_or_refuse(
                self.api, pod_path(namespace), pod_path(namespace, name), step.body,
                lambda existing: enforcement.is_controlled_by(existing, step.shadowpod))
        except Foreign as foreign:
            return await self.carry_out(key, inputs, ShadowPodPlan(
                (foreign_pod(foreign.existing, step.shadowpod),)))
        except ApiError as error:
            if error.status in RETRIED_STATUSES:
                log.error("cannot create pod %s/%s: %s", namespace, name, error)
                raise
            # Refused (ResourceQuota, Pod Security, RuntimeClass, invalid spec): recorded where
            # the home agent looks.
            return await self.carry_out(key, inputs, refused_pod(
                step.shadowpod, str(error.body.get("reason") or ""),
                str(error.body.get("message") or error), datetime.now(UTC)))
        if not created:
            return DONE
        self.metrics.count("pods_created_total")
        return await self.carry_out(key, inputs, created_pod(step.shadowpod))

    async def _record_recreation(self, step: RecordRecreation) -> None:
        """Carry the vanished pod's restarts, computed again from a fresh read if the ShadowPod
        changed meanwhile, so that restart counts never go down."""
        shadowpod, status = step.shadowpod, step.status
        meta = shadowpod["metadata"]
        log.info("recreated pod %s/%s", meta["namespace"], meta["name"])
        self.metrics.count("pod_recreations_total")
        for _ in range(5):
            if await self.write_status(shadowpod, status):
                return
            fresh = await self.api.find(shadowpod_path(meta["namespace"], meta["name"]))
            if fresh is None:
                return
            shadowpod, status = fresh, enforcement.recreated_status(fresh)
        log.error("could not record the recreation of pod %s/%s", meta["namespace"],
                  meta["name"])
