"""Pods of failed nodes: a pod the enforcer made from a ShadowPod that is Terminating on a node
NotReady (its Ready condition False or Unknown) for longer than the grace is force-deleted
(grace period 0, with its uid as precondition), so that the ShadowPod gets its pod again, on a
node that works.

Without it such a pod stays Terminating for ever: the taint manager marks the pods of a node
NotReady for deletion after their toleration (300 s by default), but a kubelet that is gone
never confirms a deletion, and the enforcer makes no new pod while the old one exists. This is
what Liqo's node-failure controller does for its ShadowPods' pods; the grace keeps a node that
is NotReady for a moment (a kubelet restarting) from having pods deleted under it.

Never touched: a pod the enforcer did not make (no controller reference to its ShadowPod), a pod
not being deleted, and a pod mounting a PersistentVolumeClaim (a `persistentVolumeClaim` or
`ephemeral` volume). Such a volume may still be attached to the failed node and written by the
pod there: a replacement elsewhere could attach it too (two writers of a ReadWriteOnce volume)
or wait on it. Kubernetes lets the cluster's admin say the node is down (the
`node.kubernetes.io/out-of-service` taint: the pod garbage collector then deletes such pods and
the volumes are detached); the enforcer only says on the ShadowPod (Event `PodOnFailedNode`,
once per pod) which claims hold the pod.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from annex.controller import DONE, Controller, Result
from annex.events import EventRecorder
from annex.informers import Change
from annex.kubeapi import ClusterApi
from annex.mirror import Key, Mirror
from annex.writes import delete_owned
from remote_enforcer.shadowpods import pod_path
from shared.forge import enforcement
from shared.rfc3339 import parse_rfc3339
from shared.wellknown import ORIGIN_CLUSTER_LABEL

log = logging.getLogger(__name__)

FORCE_DELETED_REASON = "PodForceDeleted"
HELD_REASON = "PodOnFailedNode"


def _time(text: object) -> datetime | None:
    """A timestamp the node carries, None when it has none or it is not RFC 3339."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return parse_rfc3339(text)
    except ValueError:
        return None


def not_ready_since(node: Mapping[str, Any]) -> datetime | None:
    """When the node stopped being Ready (its Ready condition's last transition), None while it
    is Ready. A node that never posted a Ready condition is NotReady since it was made."""
    metadata = node.get("metadata") or {}
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            if condition.get("status") == "True":
                return None
            return (_time(condition.get("lastTransitionTime"))
                    or _time(metadata.get("creationTimestamp")))
    return _time(metadata.get("creationTimestamp"))


def claims_of(pod: Mapping[str, Any]) -> list[str]:
    """The claims the pod mounts: its `persistentVolumeClaim` volumes and the claims of its
    `ephemeral` volumes (named `<pod>-<volume>`)."""
    name = str((pod.get("metadata") or {}).get("name") or "")
    claims = []
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        if (claim := volume.get("persistentVolumeClaim")) is not None:
            claims.append(str(claim.get("claimName") or ""))
        elif volume.get("ephemeral") is not None:
            claims.append(f"{name}-{volume.get('name')}")
    return claims


def force_delete_in(pod: Mapping[str, Any], node: Mapping[str, Any] | None, now: datetime,
                    grace: float) -> float | None:
    """Seconds until the Terminating `pod` is to be force-deleted (0: now), None when it is not
    to be: not being deleted, not on a node, or on one that is Ready (or gone: the pod garbage
    collector deletes the pods of a deleted node)."""
    if not (pod.get("metadata") or {}).get("deletionTimestamp") or node is None:
        return None
    since = not_ready_since(node)
    if since is None:
        return None
    return max(0.0, grace - (now - since).total_seconds())


class NodeFailures:
    """Fed by the routes of nodes (`on_node`) and pods (`on_pod`); reads the mirrors of the
    nodes and of the ShadowPods and their pods."""

    def __init__(self, api: ClusterApi, nodes: Mirror, pods: Mirror, shadowpods: Mirror,
                 events: EventRecorder, grace: float) -> None:
        self.api = api
        self.nodes = nodes
        self.pods = pods
        self.shadowpods = shadowpods
        self.events = events
        self.grace = grace
        self._on_node: dict[str, set[Key]] = {}  # node name -> its ShadowPods' pods
        self._node_of: dict[Key, str] = {}
        self._reported: set[str] = set()  # uids of pods held by their claims, said once
        self.listed = asyncio.Event()
        """Set once the nodes, pods and ShadowPods hold their first list."""
        self.controller: Controller[Key] = Controller("node-failures", self._reconcile,
                                                      workers=2, synced=self.listed.is_set)

    def on_node(self, change: Change) -> None:
        if not change.deleted and not_ready_since(change.obj) is not None:
            for key in self._on_node.get(change.key[1], ()):
                self.controller.add(key)

    def on_pod(self, change: Change) -> None:
        pod, key = change.obj, change.key
        if ORIGIN_CLUSTER_LABEL not in (pod["metadata"].get("labels") or {}):
            return  # not a ShadowPod's
        previous = self._node_of.pop(key, None)
        if previous is not None:
            self._on_node.get(previous, set()).discard(key)
        if change.deleted:
            self._reported.discard(str(pod["metadata"].get("uid")))
            return
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if node:
            self._node_of[key] = node
            self._on_node.setdefault(node, set()).add(key)
        if pod["metadata"].get("deletionTimestamp"):
            self.controller.add(key)

    async def _reconcile(self, key: Key) -> Result:
        pod = self.pods.get(key)
        shadowpod = self.shadowpods.get(key)
        if pod is None or shadowpod is None or not enforcement.is_controlled_by(pod, shadowpod):
            return DONE  # not a pod the enforcer made: never touched
        node_name = str((pod.get("spec") or {}).get("nodeName") or "")
        due = force_delete_in(pod, self.nodes.get(("", node_name)), datetime.now(UTC),
                              self.grace)
        if due is None:
            return DONE  # a node's change to NotReady brings the pod back
        if due > 0:
            return Result(requeue_after=due)
        uid = str(pod["metadata"]["uid"])
        if claims := claims_of(pod):
            if uid not in self._reported:
                self._reported.add(uid)
                log.warning("pod %s/%s on failed node %s mounts claims %s: not force-deleted",
                            *key, node_name, ", ".join(claims))
                await self.events.record(shadowpod, HELD_REASON, (
                    f"pod {key[1]} is Terminating on node {node_name}, NotReady, and mounts "
                    f"claims {', '.join(claims)}: not force-deleted (their volumes may still be "
                    "attached there); the provider's admin recovers the node or taints it "
                    "node.kubernetes.io/out-of-service"))
            return DONE
        # The uid precondition: never another pod of that name (a new one may already be made).
        await delete_owned(self.api, pod_path(*key), uid, {"gracePeriodSeconds": 0})
        log.info("pod %s/%s force-deleted: its node %s is NotReady", *key, node_name)
        await self.events.record(shadowpod, FORCE_DELETED_REASON, (
            f"pod {key[1]} force-deleted: it was Terminating on node {node_name}, NotReady for "
            f"more than {self.grace:g}s, whose kubelet cannot confirm the deletion; a new pod "
            "is made"), "Normal")
        return DONE
