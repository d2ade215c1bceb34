"""ShadowPod enforcement: each ShadowPod has its pod, recreated at once when deleted, never
again once terminal; the pod's status is copied into the ShadowPod (written only on change). A
pod the API server refuses (quota, policy, invalid spec) is recorded in the ShadowPod status
(condition `PodCreated` False, for the home pod to show) and tried again with backoff, and at
once when its namespace or its consumer's Quota changes: a loosened policy reaches the twin
namespace's Pod Security labels after the consumer may already offload under it, and the API
server judges a pod by the labels of the moment it is created.

Decisions are taken from the mirrors of the enforcer's informer registry (no read per event),
once both hold their first list (the controller's sync gate). One reconcile per (namespace,
name) at a time, on annex.controller; events for a key being reconciled make it run once more
afterwards.
Writes made from a cache that may lag are guarded: the ShadowPod status is written only over the
version it was computed from (a stale cache gets 409 and the newer version's event reconciles
again), and a pod seen gone is made again only after a live read of its ShadowPod (see
`_create_pod`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from annex.controller import DONE, Controller, Result
from annex.events import EventRecorder
from annex.informers import Change
from annex.kubeapi import (
    JSON_PATCH,
    RETRIED_STATUSES,
    STRATEGIC_MERGE_PATCH,
    ApiError,
    ClusterApi,
    core_path,
    custom_path,
)
from annex.mirror import Key, Mirror, key_of
from annex.writes import Foreign, create_or_refuse
from remote_enforcer import ephemeral
from remote_enforcer.consumers import Consumers
from remote_enforcer.metrics import Metrics
from shared.api.shadowpod import SHADOWPOD
from shared.forge import enforcement
from shared.forge.tenancy import origin_problem, pod_policy_problem
from shared.pools import Pool, pool_problem
from shared.wellknown import (
    FAILED_REFLECTION_REASON,
    ORIGIN_CLUSTER_LABEL,
    REMOTE_ENFORCER_COMPONENT,
    TERMINAL_PHASES,
    TRACEPARENT_ANNOTATION,
)

log = logging.getLogger(__name__)

POLICY_REFUSED_REASON = "PodPolicy"
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

    async def write_status(self, shadowpod: dict[str, Any], status: dict[str, Any]) -> bool:
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
        namespace, name = key
        last_pod = self._deleted_pods.pop(key, None)
        pod = self.pods.get(key)
        shadowpod = self.shadowpods.get(key)
        if shadowpod is None or shadowpod["metadata"].get("deletionTimestamp"):
            return DONE  # the garbage collector removes the pod with its owner
        if last_pod is not None and enforcement.is_controlled_by(last_pod, shadowpod):
            status = enforcement.shadowpod_status(shadowpod, last_pod)
            if status is not None and status.get("phase") in TERMINAL_PHASES:
                if not await self.write_status(shadowpod, status):
                    self._deleted_pods.setdefault(key, last_pod)  # again, on the newer version
                    return DONE
                shadowpod = {**shadowpod, "status": status}
        if pod is None:
            return await self._create_pod(shadowpod, seen_gone=last_pod is not None)
        if not enforcement.is_controlled_by(pod, shadowpod):
            await self._report_foreign(pod, shadowpod)
            return DONE
        status = enforcement.shadowpod_status(shadowpod, pod)
        if status is not None:
            await self.write_status(shadowpod, status)
        patch = enforcement.pod_patch(pod, shadowpod)
        if patch is not None and not pod["metadata"].get("deletionTimestamp"):
            await self.api.patch(pod_path(namespace, name), patch, STRATEGIC_MERGE_PATCH)
        await ephemeral.add_missing(self.api, self.events, pod, shadowpod)
        return DONE

    async def _create_pod(self, cached: dict[str, Any], seen_gone: bool) -> Result:
        """Make the pod of the `cached` ShadowPod. A first pod is made from the cache, as a
        ReplicaSet makes its pods: had the ShadowPod been deleted before the cache saw it, the
        pod's controller reference (the ShadowPod's uid) would have it collected. A pod seen
        gone (`seen_gone`, or the ShadowPod's status reporting one) is made again only after a
        live read: the garbage collector removes a pod only after its ShadowPod is gone, and
        the pod's deletion often arrives before the ShadowPod's, so from the cache alone every
        deleted ShadowPod would get a new pod, an orphan until collected again."""
        namespace, name = key_of(cached)
        if enforcement.is_terminal(cached):
            return DONE
        shadowpod = cached
        if seen_gone or enforcement.had_pod(cached):
            fresh = await self.api.find(shadowpod_path(namespace, name))
            if (fresh is None or fresh["metadata"].get("deletionTimestamp")
                    or enforcement.is_terminal(fresh)):
                return DONE
            shadowpod = fresh
        refusal = await self._refusal(shadowpod)
        if refusal is not None:
            # Shown at home like an API server's refusal.
            log.error("not creating pod %s/%s: %s", namespace, name, refusal)
            self._note_refusal(key_of(shadowpod))
            await self._record_refusal(shadowpod, POLICY_REFUSED_REASON, refusal)
            return REFUSED
        try:
            # Made meanwhile (by a previous run: its event reconciles), or not ours (the mirror
            # holds only pods with an origin label).
            _, created = await create_or_refuse(
                self.api, pod_path(namespace), pod_path(namespace, name),
                enforcement.desired_pod(shadowpod, self.pools),
                lambda existing: enforcement.is_controlled_by(existing, shadowpod))
        except Foreign as foreign:
            await self._report_foreign(dict(foreign.existing), shadowpod)
            return DONE
        except ApiError as error:
            log.error("cannot create pod %s/%s: %s", namespace, name, error)
            if error.status in RETRIED_STATUSES:
                raise
            # Refused (ResourceQuota, Pod Security, RuntimeClass, invalid spec): recorded where
            # the home agent looks.
            self._note_refusal(key_of(shadowpod))
            await self._record_refusal(shadowpod, str(error.body.get("reason") or ""),
                                       str(error.body.get("message") or error))
            return REFUSED
        if not created:
            return DONE
        self.metrics.count("pods_created_total")
        if enforcement.had_pod(shadowpod):
            log.info("recreated pod %s/%s", namespace, name)
            self.metrics.count("pod_recreations_total")
            await self._record_recreation(shadowpod)
        return DONE

    async def _refusal(self, shadowpod: dict[str, Any]) -> str | None:
        """Why this enforcer must not make the ShadowPod's pod, or None. Admission checks the
        same, but the enforcer may create pods cluster-wide: it creates them only in twin
        namespaces it made, for their consumer, within its pod policy, even if the webhook was
        bypassed (not registered yet, failurePolicy Ignore) or the policy tightened since."""
        meta = shadowpod["metadata"]
        namespace = (self.consumers.namespaces.get(("", meta["namespace"]))
                     or await self.api.find(core_path("namespaces", name=meta["namespace"])))
        consumer = self.consumers.twin_consumer(namespace)
        problem = (origin_problem(meta.get("labels") or {}, meta["namespace"], consumer)
                   or pool_problem(self.pools, shadowpod))
        if problem is None and consumer is not None:
            problem = pod_policy_problem(self.consumers.pod_policy(consumer), consumer,
                                         shadowpod)
        return problem

    async def _record_refusal(self, shadowpod: dict[str, Any], reason: str,
                              message: str) -> None:
        """An Event on the ShadowPod and its status condition `PodCreated` False, which the
        home agent turns into the home pod's condition and Event."""
        await self.events.record(shadowpod, "FailedCreate", f"cannot create the pod: {message}")
        status = enforcement.creation_failed_status(shadowpod, reason, message,
                                                    datetime.now(UTC))
        if status is not None:
            await self.write_status(shadowpod, status)

    async def _report_foreign(self, pod: dict[str, Any], shadowpod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        message = (f"pod {meta['namespace']}/{meta['name']} exists and is not controlled by "
                   "this ShadowPod")
        log.warning("%s: left alone", message)
        await self.events.record(shadowpod, FAILED_REFLECTION_REASON, message)

    async def _record_recreation(self, shadowpod: dict[str, Any]) -> None:
        """Carry the vanished pod's restarts (`recreated_status`), computed again from a fresh
        read if the ShadowPod changed meanwhile, so that restart counts never go down."""
        meta = shadowpod["metadata"]
        for _ in range(5):
            if await self.write_status(shadowpod, enforcement.recreated_status(shadowpod)):
                return
            fresh = await self.api.find(shadowpod_path(meta["namespace"], meta["name"]))
            if fresh is None:
                return
            shadowpod = fresh
        log.error("could not record the recreation of pod %s/%s", meta["namespace"],
                  meta["name"])
