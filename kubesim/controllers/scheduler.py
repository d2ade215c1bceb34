"""The scheduler: binds pending pods (schedulerName default-scheduler) to feasible nodes.

Pods are scheduled one at a time from a queue, against a cache of nodes and bound pods that the
scheduler updates itself when it binds ("assumes" the pod, as kube-scheduler does), so two pods
never take the same free capacity. A pod that fits nowhere gets PodScheduled=False/Unschedulable
with the real message and a FailedScheduling event, and is retried when nodes or pods change.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

from kubesim.apiserver import ApiServer, copy_json, now_timestamp
from kubesim.controllers.base import (
    Controller,
    WorkQueue,
    kind_of,
    run_together,
    watch_forever,
)
from kubesim.controllers.events import record_event
from kubesim.controllers.persistentvolume import SELECTED_NODE, pod_claim_names
from kubesim.controllers.placement import (
    NodeInfo,
    choose_node,
    occupies_node,
    pod_requests,
    rejected_by_pre_filter,
)
from kubesim.controllers.volumebinding import PodVolumes, filter_volumes, pre_filter
from kubesim.errors import StatusError
from kubesim.store import Stored

DEFAULT_SCHEDULER = "default-scheduler"
PodKey = tuple[str, str]


def _key(obj: dict[str, Any]) -> PodKey:
    return (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def _wants_scheduling(pod: dict[str, Any]) -> bool:
    spec = pod.get("spec", {})
    return (
        not spec.get("nodeName")
        and not pod["metadata"].get("deletionTimestamp")
        and (spec.get("schedulerName") or DEFAULT_SCHEDULER) == DEFAULT_SCHEDULER
        and pod.get("status", {}).get("phase", "Pending") == "Pending"
    )


class Scheduler(Controller):
    name = "scheduler"

    def __init__(self, api: ApiServer) -> None:
        super().__init__(api)
        self.pods_kind = kind_of(api, "", "v1", "pods")
        self.nodes_kind = kind_of(api, "", "v1", "nodes")
        self.nodes: dict[str, dict[str, Any]] = {}
        self.node_order: list[str] = []
        """The nodes' names, sorted: the order filtering goes round in."""
        self.next_start_node_index = 0
        """Where the next pod's filtering starts (kube-scheduler's nextStartNodeIndex): it
        stops once it has found enough feasible nodes, and the next pod goes on from there."""
        self.placed: dict[PodKey, tuple[str, dict[str, Decimal]]] = {}
        """Pod -> the node it occupies (one at most) and its requests there."""
        self.usage: dict[str, NodeInfo] = {}
        """Node -> the sum of the requests of the pods occupying it."""
        self.unschedulable: set[PodKey] = set()
        # pods assumed on a node while their WaitForFirstConsumer claims get volumes there
        self.waiting: dict[PodKey, str] = {}
        self.claims_kind = kind_of(api, "", "v1", "persistentvolumeclaims")
        self.volumes_kind = kind_of(api, "", "v1", "persistentvolumes")
        self.classes_kind = kind_of(api, "storage.k8s.io", "v1", "storageclasses")
        self.queue = WorkQueue(self._schedule, self.name)

    # ---------------------------------------------------------------- cache from the watches
    def _on_node(self, event_type: str, stored: Stored) -> None:
        name = stored.name
        known = name in self.nodes
        if event_type == "DELETED":
            self.nodes.pop(name, None)
        else:
            self.nodes[name] = stored.obj
        if known != (name in self.nodes):
            self.node_order = sorted(self.nodes)
        self._retry_unschedulable()

    def _occupy(self, node: str, key: PodKey, pod: dict[str, Any]) -> None:
        requests = pod_requests(pod)
        self.placed[key] = (node, requests)
        self.usage.setdefault(node, NodeInfo()).add(requests)

    def _forget(self, key: PodKey) -> bool:
        placed = self.placed.pop(key, None)
        if placed is None:
            return False
        node, requests = placed
        self.usage[node].remove(requests)
        return True

    def _on_pod(self, event_type: str, stored: Stored) -> None:
        pod = stored.obj
        key = _key(pod)
        freed = self._forget(key)
        if event_type != "DELETED" and occupies_node(pod):
            self._occupy(pod["spec"]["nodeName"], key, pod)
            self.waiting.pop(key, None)
        elif event_type != "DELETED" and key in self.waiting:
            self._occupy(self.waiting[key], key, pod)
        if event_type == "DELETED":
            self.unschedulable.discard(key)
            self.waiting.pop(key, None)
        elif _wants_scheduling(pod) and key not in self.unschedulable:
            self.queue.add(key)
        if freed and not occupies_node(pod):
            self._retry_unschedulable()

    def _on_claim(self, event_type: str, stored: Stored) -> None:
        """A claim changed: the pods waiting on it or turned away for it are looked at again."""
        for key in [*self.waiting, *self.unschedulable]:
            if key[0] != stored.namespace:
                continue
            pod = self.api.store.get(self.pods_kind.storage_key, *key)
            if pod is not None and stored.name in pod_claim_names(pod.obj):
                self.unschedulable.discard(key)
                self.queue.add(key)

    def _get(self, kind_key: tuple[str, str], namespace: str, name: str) -> dict[str, Any] | None:
        stored = self.api.store.get(kind_key, namespace, name)
        return stored.obj if stored is not None else None

    def _pod_volumes(self, pod: dict[str, Any]) -> tuple[PodVolumes | None, str]:
        namespace = pod["metadata"].get("namespace", "")
        return pre_filter(
            pod, lambda name: self._get(self.claims_kind.storage_key, namespace, name),
            lambda name: self._get(self.volumes_kind.storage_key, "", name),
            lambda name: self._get(self.classes_kind.storage_key, "", name))

    def _retry_unschedulable(self) -> None:
        for key in list(self.unschedulable):
            self.queue.add(key)
        self.unschedulable.clear()

    # ------------------------------------------------------------------------- scheduling
    async def _schedule(self, key: PodKey) -> None:
        stored = self.api.store.get(self.pods_kind.storage_key, *key)
        if stored is None or not _wants_scheduling(stored.obj):
            return
        pod = stored.obj
        waiting_on = self.waiting.get(key)
        volumes, why = self._pod_volumes(pod)
        if waiting_on is not None:
            if volumes is not None and not volumes.to_bind:
                await self._bind(key, pod, waiting_on)
                return
            if volumes is not None and all(
                    (c["metadata"].get("annotations") or {}).get(SELECTED_NODE) == waiting_on
                    for c in volumes.to_bind):
                return  # PreBind still waiting for the volumes
            del self.waiting[key]  # given up on that node: schedule afresh
            self._forget(key)
        nodes = [self.nodes[name] for name in self.node_order]
        if volumes is None:
            self.unschedulable.add(key)
            await self._mark_unschedulable(pod, rejected_by_pre_filter(len(nodes), why))
            return
        available = [v.obj for v in self.api.store.iterate(self.volumes_kind.storage_key)
                     if (v.obj.get("status") or {}).get("phase") == "Available"] \
            if volumes.to_bind else []
        chosen, message, processed = choose_node(
            pod, nodes, self.usage,
            lambda node: filter_volumes(volumes, dict(node), available),
            start=self.next_start_node_index)
        if nodes:
            self.next_start_node_index = (self.next_start_node_index + processed) % len(nodes)
        if chosen is None:
            self.unschedulable.add(key)
            await self._mark_unschedulable(pod, message)
            return
        if volumes.to_bind:
            self._forget(key)
            self._occupy(chosen, key, pod)
            self.waiting[key] = chosen
            for claim in volumes.to_bind:
                await self._select_node(claim, chosen)
            return
        await self._bind(key, pod, chosen)

    async def _select_node(self, claim: dict[str, Any], node: str) -> None:
        """PreBind: the claim is to get its volume on `node`."""
        if (claim["metadata"].get("annotations") or {}).get(SELECTED_NODE) == node:
            return
        new = copy_json(claim)
        new["metadata"].setdefault("annotations", {})[SELECTED_NODE] = node
        await self.api.update(self.claims_kind, claim["metadata"]["namespace"],
                              claim["metadata"]["name"], new)

    async def _bind(self, key: PodKey, pod: dict[str, Any], chosen: str) -> None:
        namespace, name = key
        binding = {"apiVersion": "v1", "kind": "Binding",
                   "metadata": {"name": name, "namespace": namespace},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": chosen}}
        try:
            await self.api.create(self.pods_kind, namespace, binding, name=name,
                                  subresource="binding")
        except StatusError as error:
            if error.code in (404, 409):
                return  # gone, or bound by someone else meanwhile
            raise
        self.waiting.pop(key, None)
        self._forget(key)  # assumed on the chosen node until its watch event says so
        self._occupy(chosen, key, pod)
        await record_event(self.api, pod, "Normal", "Scheduled",
                           f"Successfully assigned {namespace}/{name} to {chosen}",
                           component=DEFAULT_SCHEDULER)

    async def _mark_unschedulable(self, pod: dict[str, Any], message: str) -> None:
        conditions = pod.get("status", {}).get("conditions") or []
        current = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
        if current and current.get("reason") == "Unschedulable" and (
            current.get("message") == message
        ):
            return
        condition = {"type": "PodScheduled", "status": "False", "lastProbeTime": None,
                     "lastTransitionTime": now_timestamp(), "reason": "Unschedulable",
                     "message": message}
        patch = {"metadata": {"resourceVersion": pod["metadata"]["resourceVersion"]},
                 "status": {"conditions": [condition]}}
        namespace, name = _key(pod)
        await self.api.patch(self.pods_kind, namespace, name, patch,
                             "application/strategic-merge-patch+json", subresource="status")
        await record_event(self.api, pod, "Warning", "FailedScheduling", message,
                           component=DEFAULT_SCHEDULER)

    async def run(self) -> None:
        nodes_synced = asyncio.Event()
        await run_together(
            watch_forever(self.api, self.nodes_kind, self._on_node, synced=nodes_synced),
            self._schedule_once_nodes_are_known(nodes_synced),
        )

    async def _schedule_once_nodes_are_known(self, nodes_synced: asyncio.Event) -> None:
        await nodes_synced.wait()  # else the first pods would find no node at all
        await run_together(watch_forever(self.api, self.pods_kind, self._on_pod),
                           watch_forever(self.api, self.claims_kind, self._on_claim),
                           self.queue.run())
