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

from kubesim.apiserver import ApiServer, now_timestamp
from kubesim.controllers.base import (
    Controller,
    WorkQueue,
    kind_of,
    run_together,
    watch_forever,
)
from kubesim.controllers.events import record_event
from kubesim.controllers.placement import NodeInfo, choose_node, occupies_node, pod_requests
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
        # node -> the requests of each pod occupying it, and their sum
        self.bound: dict[str, dict[PodKey, dict[str, Decimal]]] = {}
        self.usage: dict[str, NodeInfo] = {}
        self.unschedulable: set[PodKey] = set()
        self.queue = WorkQueue(self._schedule, self.name)

    # ---------------------------------------------------------------- cache from the watches
    def _on_node(self, event_type: str, stored: Stored) -> None:
        name = stored.name
        if event_type == "DELETED":
            self.nodes.pop(name, None)
        else:
            self.nodes[name] = stored.obj
        self._retry_unschedulable()

    def _occupy(self, node: str, key: PodKey, pod: dict[str, Any]) -> None:
        requests = pod_requests(pod)
        self.bound.setdefault(node, {})[key] = requests
        self.usage.setdefault(node, NodeInfo()).add(requests)

    def _forget(self, key: PodKey) -> bool:
        freed = False
        for node, pods in self.bound.items():
            requests = pods.pop(key, None)
            if requests is not None:
                self.usage[node].remove(requests)
                freed = True
        return freed

    def _on_pod(self, event_type: str, stored: Stored) -> None:
        pod = stored.obj
        key = _key(pod)
        freed = self._forget(key)
        if event_type != "DELETED" and occupies_node(pod):
            self._occupy(pod["spec"]["nodeName"], key, pod)
        if event_type == "DELETED":
            self.unschedulable.discard(key)
        elif _wants_scheduling(pod) and key not in self.unschedulable:
            self.queue.add(key)
        if freed and not occupies_node(pod):
            self._retry_unschedulable()

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
        nodes = [self.nodes[name] for name in sorted(self.nodes)]
        chosen, message = choose_node(pod, nodes, self.usage)
        if chosen is None:
            self.unschedulable.add(key)
            await self._mark_unschedulable(pod, message)
            return
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
                           self.queue.run())
