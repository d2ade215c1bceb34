"""Taint eviction: pods on a node with NoExecute taints they do not tolerate are deleted.

Like kube-controller-manager's taint-eviction-controller (pkg/controller/tainteviction):
- a pod that does not tolerate every NoExecute taint of its node is deleted at once;
- one whose matching tolerations all carry tolerationSeconds is deleted after the smallest of
  them (0 or less: at once), counted from when the eviction was first scheduled;
- one that tolerates every taint with at least one toleration without tolerationSeconds is kept;
- when the taints go away (or the pod stops being on the node) a scheduled eviction is
  cancelled.
Each eviction records a Normal `TaintManagerEviction` Event "Marking for deletion Pod ns/name"
(a cancellation "Cancelling deletion of Pod ns/name"), sets the pod's DisruptionTarget
condition (reason DeletionByTaintManager), then deletes it with default options.
With the DefaultTolerationSeconds admission plugin every pod tolerates the not-ready and
unreachable taints for 300 s, so a node going NotReady loses its pods after 5 minutes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from kubesim.apiserver import ApiServer, copy_json
from kubesim.controllers.base import (
    Controller,
    WorkQueue,
    kind_of,
    run_together,
    set_pod_condition,
    watch_forever,
)
from kubesim.controllers.events import record_event
from kubesim.controllers.placement import tolerates
from kubesim.errors import StatusError
from kubesim.store import Stored

COMPONENT = "taint-eviction-controller"
PodKey = tuple[str, str]
_FOREVER = -1.0


def no_execute_taints(node: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    taints = ((node or {}).get("spec") or {}).get("taints") or []
    return [t for t in taints if t.get("effect") == "NoExecute"]


def matching_tolerations(taints: Sequence[Mapping[str, Any]],
                         tolerations: Sequence[Mapping[str, Any]]
                         ) -> list[Mapping[str, Any]] | None:
    """v1helper.GetMatchingTolerations: the first toleration of each taint, or None when some
    taint is tolerated by none."""
    used = []
    for taint in taints:
        match = next((t for t in tolerations if tolerates(t, taint)), None)
        if match is None:
            return None
        used.append(match)
    return used


def min_toleration_seconds(used: Sequence[Mapping[str, Any]]) -> float:
    """getMinTolerationTime: 0 without tolerations, the smallest tolerationSeconds (0 if one is
    not positive), or `_FOREVER` when none of them carries tolerationSeconds."""
    if not used:
        return 0.0
    seconds = [t["tolerationSeconds"] for t in used if t.get("tolerationSeconds") is not None]
    if not seconds:
        return _FOREVER
    return max(0.0, float(min(seconds)))


class TaintEviction(Controller):
    name = "taint-eviction-controller"

    def __init__(self, api: ApiServer) -> None:
        super().__init__(api)
        self.nodes_kind = kind_of(api, "", "v1", "nodes")
        self.pods_kind = kind_of(api, "", "v1", "pods")
        self.node_taints: dict[str, list[Mapping[str, Any]]] = {}
        self.pods_on_node: dict[str, set[PodKey]] = {}
        self.pod_node: dict[PodKey, str] = {}
        # scheduled evictions: pod -> (when it was first scheduled, its timer)
        self.scheduled: dict[PodKey, tuple[float, asyncio.TimerHandle]] = {}
        self.evicting: set[PodKey] = set()  # marked for deletion: not scheduled again
        self.queue = WorkQueue(self._evict, self.name)
        self.records: list[asyncio.Task[None]] = []

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    # ------------------------------------------------------------------ informers

    def _on_node(self, event_type: str, stored: Stored) -> None:
        taints = [] if event_type == "DELETED" else no_execute_taints(stored.obj)
        if event_type == "DELETED":
            self.node_taints.pop(stored.name, None)
        else:
            if self.node_taints.get(stored.name) == taints:
                return
            self.node_taints[stored.name] = taints
        for key in list(self.pods_on_node.get(stored.name, ())):
            self._process(key)

    def _on_pod(self, event_type: str, stored: Stored) -> None:
        key = (stored.namespace, stored.name)
        node = (stored.obj.get("spec") or {}).get("nodeName") or ""
        previous = self.pod_node.pop(key, None)
        if previous is not None:
            self.pods_on_node.get(previous, set()).discard(key)
        if event_type == "DELETED" or not node:
            self.evicting.discard(key)
            self._cancel(key, with_event=False)
            return
        self.pod_node[key] = node
        self.pods_on_node.setdefault(node, set()).add(key)
        self._process(key)

    # ------------------------------------------------------------------ decisions

    def _process(self, key: PodKey) -> None:
        """processPodOnNode."""
        node = self.pod_node.get(key)
        stored = self.api.store.get(self.pods_kind.storage_key, *key)
        taints = self.node_taints.get(node or "", [])
        if stored is None or node is None or not taints:
            self._cancel(key)
            return
        if key in self.evicting or stored.obj["metadata"].get("deletionTimestamp"):
            return  # being deleted already
        tolerations = (stored.obj.get("spec") or {}).get("tolerations") or []
        used = matching_tolerations(taints, tolerations)
        if used is None:  # deleted right away: a scheduled eviction gives way (with its event)
            self._cancel(key)
            self._schedule(key, self._now(), 0.0)
            return
        seconds = min_toleration_seconds(used)
        if seconds == _FOREVER:
            self._cancel(key)
            return
        if key in self.scheduled:
            return  # the eviction scheduled first stands, as in processPodOnNode
        self._schedule(key, self._now(), seconds)

    def _schedule(self, key: PodKey, since: float, seconds: float) -> None:
        handle = asyncio.get_running_loop().call_later(seconds, self.queue.add, key)
        self.scheduled[key] = (since, handle)

    def _cancel(self, key: PodKey, with_event: bool = True) -> None:
        scheduled = self.scheduled.pop(key, None)
        if scheduled is None:
            return
        scheduled[1].cancel()
        if with_event:
            self._record(key, f"Cancelling deletion of Pod {key[0]}/{key[1]}")

    def _record(self, key: PodKey, message: str) -> None:
        # the recorder's reference carries only kind, name and namespace
        regarding = {"apiVersion": "", "kind": "Pod",
                     "metadata": {"name": key[1], "namespace": key[0]}}
        task = asyncio.ensure_future(record_event(
            self.api, regarding, "Normal", "TaintManagerEviction", message, COMPONENT))
        self.records.append(task)
        task.add_done_callback(self.records.remove)

    # ------------------------------------------------------------------ eviction

    async def _evict(self, key: PodKey) -> None:
        """deletePodHandler: the event, the DisruptionTarget condition, then the delete."""
        if self.scheduled.pop(key, None) is None and key not in self.evicting:
            return  # cancelled meanwhile
        stored = self.api.store.get(self.pods_kind.storage_key, *key)
        if stored is None:
            return
        if key not in self.evicting:  # a retry (after a conflict) records nothing new
            self.evicting.add(key)
            self._record(key, f"Marking for deletion Pod {key[0]}/{key[1]}")
        try:
            await self._add_disruption_condition(stored.obj)
            await self.api.delete(self.pods_kind, key[0], key[1])
        except StatusError as error:
            if error.code != 404:
                raise

    async def _add_disruption_condition(self, pod: dict[str, Any]) -> None:
        new = copy_json(pod)
        if set_pod_condition(new.setdefault("status", {}), {
                "type": "DisruptionTarget", "status": "True",
                "reason": "DeletionByTaintManager",
                "message": "Taint manager: deleting due to NoExecute taint"}):
            await self.api.update(self.pods_kind, pod["metadata"]["namespace"],
                                  pod["metadata"]["name"], new, subresource="status")

    async def run(self) -> None:
        await run_together(
            watch_forever(self.api, self.nodes_kind, self._on_node),
            watch_forever(self.api, self.pods_kind, self._on_pod),
            self.queue.run(),
        )
