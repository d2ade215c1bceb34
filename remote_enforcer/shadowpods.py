"""ShadowPod enforcement: each ShadowPod has its pod, recreated at once when deleted, never
again once terminal; the pod's status is copied into the ShadowPod (written only on change).

One reconcile per (namespace, name) at a time: pod and ShadowPod events for the same key are
serialized so that a recreation is never decided on a status that is being written.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from typing import Any

from annex.kubeapi import (
    RETRIED_STATUSES,
    STRATEGIC_MERGE_PATCH,
    ApiError,
    ClusterApi,
    core_path,
    custom_path,
    retrying,
)
from remote_enforcer.events import EventRecorder
from remote_enforcer.metrics import Metrics
from shared.api.shadowpod import SHADOWPOD
from shared.forge import enforcement
from shared.wellknown import FAILED_REFLECTION_REASON

log = logging.getLogger(__name__)

JSON_PATCH = "application/json-patch+json"


def shadowpod_path(namespace: str, name: str = "", subresource: str = "") -> str:
    return custom_path(SHADOWPOD, namespace, name, subresource)


def pod_path(namespace: str, name: str = "") -> str:
    return core_path("pods", namespace, name)


class ShadowPodEnforcer:
    def __init__(self, api: ClusterApi, metrics: Metrics) -> None:
        self.api = api
        self.metrics = metrics
        self.events = EventRecorder(api)
        # uid -> what the pod follows, as last reconciled: a ShadowPod event that changes only
        # the status (most of them: the enforcer's own writes) needs no reconcile.
        self._followed: dict[str, tuple[Any, ...]] = {}
        self._locks: defaultdict[tuple[str, str], asyncio.Lock] = defaultdict(asyncio.Lock)

    async def on_shadowpod_event(self, event_type: str | None, shadowpod: dict[str, Any]) -> None:
        meta = shadowpod["metadata"]
        uid = meta.get("uid", "")
        if event_type == "DELETED":
            self._followed.pop(uid, None)
            return
        followed = enforcement.followed_fields(shadowpod)
        if self._followed.get(uid) == followed:
            return
        await self.reconcile(meta["namespace"], meta["name"])
        self._followed[uid] = followed

    async def write_status(self, shadowpod: dict[str, Any], status: dict[str, Any]) -> None:
        # JSON patch "add" replaces the whole status: a merge patch would keep stale keys of
        # the previous podStatus.
        meta = shadowpod["metadata"]
        await self.api.patch(shadowpod_path(meta["namespace"], meta["name"], "status"),
                             [{"op": "add", "path": "/status", "value": status}],
                             JSON_PATCH)

    async def reconcile(self, namespace: str, name: str,
                        last_pod: dict[str, Any] | None = None) -> None:
        """Bring the pod and the ShadowPod status in line. `last_pod` is the final state of a
        pod that was just deleted: a terminal phase in it is recorded before anything else."""
        async with self._locks[(namespace, name)]:
            try:
                await retrying(lambda: self._reconcile(namespace, name, last_pod))
            finally:
                lock = self._locks.get((namespace, name))
                if lock is not None and not lock._waiters:  # noqa: SLF001 - drop idle locks
                    self._locks.pop((namespace, name), None)

    async def _reconcile(self, namespace: str, name: str, last_pod: dict[str, Any] | None) -> None:
        # The pod is read before its ShadowPod: the garbage collector removes a pod only after
        # its ShadowPod is gone, so a missing pod next to a ShadowPod read later is a pod to
        # recreate. Read the other way round, a ShadowPod deleted (and its pod collected)
        # between the two reads got a new pod, an orphan the collector then removed.
        pod = await self.api.find(pod_path(namespace, name))
        shadowpod = await self.api.find(shadowpod_path(namespace, name))
        if shadowpod is None or shadowpod["metadata"].get("deletionTimestamp"):
            return  # the garbage collector removes the pod with its owner
        if last_pod is not None and enforcement.is_controlled_by(last_pod, shadowpod):
            status = enforcement.shadowpod_status(shadowpod, last_pod)
            if status is not None and status.get("phase") in enforcement.TERMINAL_PHASES:
                await self.write_status(shadowpod, status)
                shadowpod = {**shadowpod, "status": status}
        if pod is None:
            await self._create_pod(shadowpod)
            return
        if not enforcement.is_controlled_by(pod, shadowpod):
            message = f"pod {namespace}/{name} exists and is not controlled by this ShadowPod"
            log.warning("%s: left alone", message)
            await self.events.warn(shadowpod, FAILED_REFLECTION_REASON, message)
            return
        status = enforcement.shadowpod_status(shadowpod, pod)
        if status is not None:
            await self.write_status(shadowpod, status)
        patch = enforcement.pod_patch(pod, shadowpod)
        if patch is not None and not pod["metadata"].get("deletionTimestamp"):
            await self.api.patch(pod_path(namespace, name), patch, STRATEGIC_MERGE_PATCH)

    async def _create_pod(self, shadowpod: dict[str, Any]) -> None:
        if enforcement.is_terminal(shadowpod):
            return
        meta = shadowpod["metadata"]
        try:
            await self.api.create(pod_path(meta["namespace"]), enforcement.desired_pod(shadowpod))
        except ApiError as error:
            if error.status == 409:
                return  # made meanwhile (e.g. by a previous run): the pod event reconciles
            log.error("cannot create pod %s/%s: %s", meta["namespace"], meta["name"], error)
            if error.status in RETRIED_STATUSES:
                raise
            # Refused for good (invalid spec, ResourceQuota, ...): say so where the user looks.
            await self.events.warn(shadowpod, "FailedCreate",
                                   f"cannot create the pod: {error.body.get('message', error)}")
            return
        self.metrics.count("pods_created_total")
        if enforcement.had_pod(shadowpod):
            log.info("recreated pod %s/%s", meta["namespace"], meta["name"])
            self.metrics.count("pod_recreations_total")
            await self.write_status(shadowpod, enforcement.recreated_status(shadowpod))
