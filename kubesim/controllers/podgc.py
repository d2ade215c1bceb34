"""Pod garbage collection, as kube-controller-manager's pod-garbage-collector-controller
(pkg/controller/podgc/gc_controller.go) does it. Every `check_period` (20 s), a pass:

- terminated pods (phase neither Pending, Running nor Unknown) beyond `terminated_threshold`
  (--terminated-pod-gc-threshold, 12,500; 0 turns it off) go, evicted ones first, then the
  oldest;
- terminating pods on a node that is not Ready and carries the `node.kubernetes.io/out-of-
  service` taint go;
- **orphaned pods**, bound to a node that does not exist, go once the node has been missing for
  `quarantine` (40 s) and a read of the Node confirms it is gone: what a controller that binds
  pods to a node it never registered (or deleted) sees on a real cluster;
- terminating pods that were never scheduled go.

Each goes the same way: a pod not yet terminal is first marked Failed (an orphan with the
DisruptionTarget condition, reason DeletionByPodGC), then deleted with a grace period of 0.
No Events are recorded.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kubesim.apiserver import ApiServer, copy_json
from kubesim.controllers.base import Controller, kind_of, set_pod_condition
from kubesim.controllers.nodelifecycle import ready_status
from kubesim.errors import StatusError
from kubesim.store import Stored

log = logging.getLogger("kubesim.controllers.podgc")

OUT_OF_SERVICE_TAINT = "node.kubernetes.io/out-of-service"
ORPHANED = {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC",
            "message": "PodGC: node no longer exists"}


def is_terminated(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Pending", "Running", "Unknown", None)


def is_terminating(pod: dict[str, Any]) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def node_name(pod: dict[str, Any]) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def deletion_order(pod: dict[str, Any]) -> tuple[bool, str, str]:
    """byEvictionAndCreationTimestamp: evicted pods first, then the oldest, then by name."""
    status = pod.get("status") or {}
    evicted = status.get("phase") == "Failed" and status.get("reason") == "Evicted"
    return not evicted, pod["metadata"].get("creationTimestamp") or "", pod["metadata"]["name"]


def is_out_of_service(node: dict[str, Any]) -> bool:
    taints = (node.get("spec") or {}).get("taints") or []
    return (ready_status(node) != "True"
            and any(t.get("key") == OUT_OF_SERVICE_TAINT for t in taints))


class PodGC(Controller):
    name = "pod-garbage-collector"

    def __init__(self, api: ApiServer, check_period: float = 20.0, quarantine: float = 40.0,
                 terminated_threshold: int = 12500) -> None:
        super().__init__(api)
        self.pods_kind = kind_of(api, "", "v1", "pods")
        self.nodes_kind = kind_of(api, "", "v1", "nodes")
        self.check_period = check_period
        self.quarantine = quarantine
        self.terminated_threshold = terminated_threshold
        self.missing_since: dict[str, float] = {}
        """Nodes pods are bound to that were missing from the cache: when each was first
        found missing (the quarantine queue)."""

    async def run(self) -> None:
        while True:  # wait.Until: at once, then every period
            try:
                await self.gc()
            except asyncio.CancelledError:
                raise
            except Exception:  # a pass that failed is simply the next pass's work
                log.exception("pod garbage collection failed")
            await asyncio.sleep(self.check_period)

    async def gc(self) -> None:
        pods = [stored.obj for stored in self.api.store.list(self.pods_kind.storage_key)]
        nodes = {stored.name: stored.obj
                 for stored in self.api.store.list(self.nodes_kind.storage_key)}
        if self.terminated_threshold > 0:
            terminated = sorted((p for p in pods if is_terminated(p)), key=deletion_order)
            for pod in terminated[:max(0, len(terminated) - self.terminated_threshold)]:
                await self._delete(pod)
        for pod in pods:
            node = nodes.get(node_name(pod))
            if is_terminating(pod) and node is not None and is_out_of_service(node):
                await self._delete(pod)
        gone = self._gone_nodes(pods, nodes)
        for pod in pods:
            if node_name(pod) in gone:
                log.info("pod %s/%s is bound to node %s, which no longer exists: deleting",
                         pod["metadata"]["namespace"], pod["metadata"]["name"], node_name(pod))
                await self._delete(pod, ORPHANED)
        for pod in pods:
            if is_terminating(pod) and not node_name(pod):
                await self._delete(pod)

    def _gone_nodes(self, pods: list[dict[str, Any]], nodes: dict[str, Any]) -> set[str]:
        """The nodes pods are bound to that have been missing for the quarantine and are still
        missing when looked up again (a node the cache had not seen yet survives)."""
        now = asyncio.get_running_loop().time()
        for pod in pods:
            name = node_name(pod)
            if name and name not in nodes:
                self.missing_since.setdefault(name, now)
        due = [name for name, since in self.missing_since.items()
               if now - since >= self.quarantine]
        for name in due:
            del self.missing_since[name]
        return {name for name in due if not self.api.exists(self.nodes_kind, "", name)}

    async def _delete(self, pod: dict[str, Any], condition: dict[str, str] | None = None
                      ) -> None:
        """markFailedAndDeletePodWithCondition: Failed first (the condition with it), so a pod
        no kubelet will ever finish does not stay Running; then a delete with no grace."""
        metadata = pod["metadata"]
        namespace, name = metadata["namespace"], metadata["name"]
        try:
            if not is_terminated(pod):
                await self._mark_failed(pod, condition)
            await self.api.delete(self.pods_kind, namespace, name,
                                  options={"gracePeriodSeconds": 0})
        except StatusError as error:
            if error.code not in (404, 409):  # gone already, or changed: the next pass sees
                log.warning("deleting pod %s/%s failed: %s", namespace, name, error)

    async def _mark_failed(self, pod: dict[str, Any], condition: dict[str, str] | None) -> None:
        current: Stored | None = self.api.store.get(self.pods_kind.storage_key,
                                                    pod["metadata"]["namespace"],
                                                    pod["metadata"]["name"])
        if current is None or current.obj["metadata"]["uid"] != pod["metadata"]["uid"]:
            return
        new = copy_json(current.obj)
        status = new.setdefault("status", {})
        status["phase"] = "Failed"
        if condition is not None:
            set_pod_condition(status, condition)
        await self.api.update(self.pods_kind, new["metadata"]["namespace"],
                              new["metadata"]["name"], new, subresource="status")
