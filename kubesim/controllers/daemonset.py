"""DaemonSet controller (pkg/controller/daemon): one pod of the set on every node that should
run one, placed by the scheduler through a node affinity naming that node.

A node should run the set's pod (`should_run`) when the pod the set would make for it, with the
tolerations every daemon pod gets, matches the node's labels (nodeSelector, required node
affinity) and tolerates each of its NoSchedule and NoExecute taints; a pod already there
continues running (`should_continue`) unless a NoExecute taint is not tolerated. Per node, as
`podsShouldBeOnNode`: a missing pod is made; a failed one is deleted (with the controller's
backoff, 1 s doubling up to 15 min per set and node, and a FailedDaemonPod Event on the set) for
the next pass to make again; a succeeded one is deleted; of several, all but the oldest go; on a
node that should not continue, all go. Template changes roll out as RollingUpdate with
maxUnavailable (old pods deleted while fewer than that are unavailable; an unavailable old pod
goes at once); maxSurge is not simulated. Status as `updateDaemonSetStatus` counts it.

Not simulated: ControllerRevisions (the pods' `controller-revision-hash` is a hash of the
template, as the revision's name suffix is), expectations and slow-start batches.
"""

from __future__ import annotations

import hashlib
import json
import time
from datetime import UTC, datetime
from typing import Any

from kubesim.apiserver import ApiServer, copy_json
from kubesim.controllers.base import (
    Controller,
    WorkQueue,
    kind_of,
    replace_status,
    run_together,
    watch_forever,
)
from kubesim.controllers.events import record_event
from kubesim.controllers.placement import first_untolerated_taint, matches_node_affinity
from kubesim.controllers.replicaset import controller_of, is_ready, owner_reference
from kubesim.errors import StatusError
from kubesim.printers import parse_time
from kubesim.store import Stored
from kubesim.strategies import TEMPLATE_GENERATION_ANNOTATION

Key = tuple[str, str]
COMPONENT = "daemonset-controller"
REVISION_HASH_LABEL = "controller-revision-hash"
TEMPLATE_GENERATION_LABEL = "pod-template-generation"
FAILED_BACKOFF_BASE, FAILED_BACKOFF_MAX = 1.0, 900.0
_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

# util.AddOrUpdateDaemonPodTolerations
DAEMON_TOLERATIONS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)
NETWORK_UNAVAILABLE_TOLERATION = {"key": "node.kubernetes.io/network-unavailable",
                                  "operator": "Exists", "effect": "NoSchedule"}


def daemon_tolerations(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod spec's tolerations with the daemon ones added or updated (same key and effect)."""
    tolerations = [dict(t) for t in spec.get("tolerations") or []]
    wanted = [*DAEMON_TOLERATIONS, *([NETWORK_UNAVAILABLE_TOLERATION]
                                     if spec.get("hostNetwork") else [])]
    for toleration in wanted:
        same = [i for i, t in enumerate(tolerations)
                if t.get("key") == toleration["key"] and t.get("effect") == toleration["effect"]]
        if same:
            tolerations[same[0]] = dict(toleration)
        else:
            tolerations.append(dict(toleration))
    return tolerations


def node_should_run(node: dict[str, Any], daemon_set: dict[str, Any]) -> tuple[bool, bool]:
    """NodeShouldRunDaemonPod: (should run, should continue running)."""
    template_spec = ((daemon_set.get("spec") or {}).get("template") or {}).get("spec") or {}
    name = node["metadata"]["name"]
    if template_spec.get("nodeName") and template_spec["nodeName"] != name:
        return False, False
    pod = {"spec": {**template_spec, "nodeName": name,
                    "tolerations": daemon_tolerations(template_spec)}}
    if not matches_node_affinity(pod, node):
        return False, False
    taints = (node.get("spec") or {}).get("taints") or []
    tolerations = pod["spec"]["tolerations"]
    if first_untolerated_taint(taints, tolerations) is not None:
        return False, first_untolerated_taint(taints, tolerations, ("NoExecute",)) is None
    return True, True


def template_hash(daemon_set: dict[str, Any]) -> str:
    template = json.dumps((daemon_set.get("spec") or {}).get("template") or {}, sort_keys=True)
    digest = hashlib.sha256(template.encode()).digest()
    return "".join(_SAFE_ALPHABET[byte % len(_SAFE_ALPHABET)] for byte in digest[:10])


def target_node(pod: dict[str, Any]) -> str | None:
    """GetTargetNodeName: the pod's node, or the one its node affinity names (not bound yet)."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    for term in required.get("nodeSelectorTerms") or []:
        for requirement in term.get("matchFields") or []:
            if (requirement.get("key") == "metadata.name" and requirement.get("operator") == "In"
                    and len(requirement.get("values") or []) == 1):
                return str(requirement["values"][0])
    return None


def _node_affinity(affinity: dict[str, Any] | None, node: str) -> dict[str, Any]:
    """ReplaceDaemonSetPodNodeNameNodeAffinity: the required terms replaced by the node's name."""
    affinity = copy_json(affinity or {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}
    return affinity


def _phase(pod: dict[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def _age_order(pod: dict[str, Any]) -> tuple[int, str, str]:
    """podByCreationTimestampAndPhase: scheduled first, then oldest, then by name."""
    return (0 if (pod.get("spec") or {}).get("nodeName") else 1,
            pod["metadata"].get("creationTimestamp") or "", pod["metadata"]["name"])


def is_available(pod: dict[str, Any], min_ready_seconds: int) -> bool:
    """IsPodAvailable: Ready for at least minReadySeconds."""
    if not is_ready(pod):
        return False
    if min_ready_seconds <= 0:
        return True
    ready = next(c for c in (pod.get("status") or {}).get("conditions") or []
                 if c.get("type") == "Ready")
    since = parse_time(ready.get("lastTransitionTime"))
    return since is not None and (datetime.now(UTC) - since).total_seconds() >= min_ready_seconds


def _max_unavailable(daemon_set: dict[str, Any], desired: int) -> int:
    rolling = ((daemon_set.get("spec") or {}).get("updateStrategy") or {}).get(
        "rollingUpdate") or {}
    value = rolling.get("maxUnavailable", 1)
    if isinstance(value, str) and value.endswith("%"):
        return max(1, desired * int(value[:-1]) // 100) if int(value[:-1]) else 0
    return int(value)


class DaemonSetController(Controller):
    name = "daemonset"

    def __init__(self, api: ApiServer) -> None:
        super().__init__(api)
        self.sets_kind = kind_of(api, "apps", "v1", "daemonsets")
        self.pods_kind = kind_of(api, "", "v1", "pods")
        self.nodes_kind = kind_of(api, "", "v1", "nodes")
        self.queue = WorkQueue(self._reconcile, self.name, workers=2)
        self._failed_backoff: dict[tuple[str, int, str], tuple[float, float]] = {}
        """(set uid, observed generation, node) → (delay, monotonic time it was last used)."""

    def _on_set(self, event_type: str, stored: Stored) -> None:
        self.queue.add((stored.namespace, stored.name))

    def _on_pod(self, event_type: str, stored: Stored) -> None:
        owner = controller_of(stored.obj, "DaemonSet")
        if owner is not None:
            self.queue.add((stored.namespace, owner["name"]))

    def _on_node(self, event_type: str, stored: Stored) -> None:
        for daemon_set in self.api.store.iterate(self.sets_kind.storage_key):
            self.queue.add((daemon_set.namespace, daemon_set.name))

    def _nodes(self) -> list[dict[str, Any]]:
        return [n.obj for n in self.api.store.iterate(self.nodes_kind.storage_key)]

    def _pods_by_node(self, daemon_set: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
        """getNodesToDaemonPods: the set's pods by target node (terminal deleted ones left out)."""
        uid = daemon_set["metadata"]["uid"]
        by_node: dict[str, list[dict[str, Any]]] = {}
        for stored in self.api.store.list(self.pods_kind.storage_key,
                                          daemon_set["metadata"]["namespace"]):
            pod = stored.obj
            if (controller_of(pod, "DaemonSet") or {}).get("uid") != uid:
                continue
            if _phase(pod) in ("Succeeded", "Failed") and pod["metadata"].get(
                    "deletionTimestamp"):
                continue
            node = target_node(pod)
            if node is not None:
                by_node.setdefault(node, []).append(pod)
        return by_node

    def _in_backoff(self, key: tuple[str, int, str]) -> float | None:
        """Seconds left of the failed-pod backoff for `key`, or None when it may act (and the
        backoff doubles)."""
        now = time.monotonic()
        delay, last = self._failed_backoff.get(key, (0.0, 0.0))
        if delay and now - last < delay:
            return delay - (now - last)
        self._failed_backoff[key] = (min(FAILED_BACKOFF_MAX, delay * 2 or FAILED_BACKOFF_BASE),
                                     now)
        return None

    async def _reconcile(self, key: Key) -> None:
        stored = self.api.store.get(self.sets_kind.storage_key, *key)
        if stored is None or stored.obj["metadata"].get("deletionTimestamp"):
            return
        daemon_set = stored.obj
        revision = template_hash(daemon_set)
        by_node = self._pods_by_node(daemon_set)
        nodes = self._nodes()
        to_create: list[str] = []
        to_delete: list[dict[str, Any]] = []
        generation = int(daemon_set["metadata"].get("generation") or 1)
        for node in nodes:
            name = node["metadata"]["name"]
            should_run, should_continue = node_should_run(node, daemon_set)
            pods = by_node.get(name, [])
            if should_run and not pods:
                to_create.append(name)
            elif should_continue:
                running = []
                for pod in pods:
                    if pod["metadata"].get("deletionTimestamp"):
                        continue
                    if _phase(pod) == "Failed":
                        backoff_key = (daemon_set["metadata"]["uid"], generation, name)
                        if (left := self._in_backoff(backoff_key)) is not None:
                            self.queue.add_later(key, left)
                            continue
                        await record_event(
                            self.api, daemon_set, "Warning", "FailedDaemonPod",
                            f"Found failed daemon pod {key[0]}/{pod['metadata']['name']} on "
                            f"node {name}, will try to kill it", COMPONENT)
                        to_delete.append(pod)
                    elif _phase(pod) == "Succeeded":
                        to_delete.append(pod)
                    else:
                        running.append(pod)
                to_delete.extend(sorted(running, key=_age_order)[1:])
            elif pods:
                to_delete.extend(p for p in pods if not p["metadata"].get("deletionTimestamp"))
        known = {node["metadata"]["name"] for node in nodes}
        to_delete.extend(pod for node, pods in by_node.items() if node not in known
                         for pod in pods if not (pod.get("spec") or {}).get("nodeName"))
        for name in to_create:
            await self._create_pod(daemon_set, name, revision)
        for pod in to_delete:
            await self._delete_pod(pod)
        if not to_create and not to_delete and (
                (daemon_set.get("spec") or {}).get("updateStrategy") or {}).get(
                "type", "RollingUpdate") == "RollingUpdate":
            await self._roll(daemon_set, nodes, revision)
        await self._write_status(key, revision)

    async def _roll(self, daemon_set: dict[str, Any], nodes: list[dict[str, Any]],
                    revision: str) -> None:
        """rollingUpdate without surge: old pods go while fewer than maxUnavailable are."""
        min_ready = int((daemon_set.get("spec") or {}).get("minReadySeconds") or 0)
        by_node = self._pods_by_node(daemon_set)
        desired = sum(1 for node in nodes if node_should_run(node, daemon_set)[0])
        budget = _max_unavailable(daemon_set, desired)
        unavailable = 0
        replace: list[dict[str, Any]] = []
        candidates: list[dict[str, Any]] = []
        for node in nodes:
            if not node_should_run(node, daemon_set)[0]:
                continue
            pods = [p for p in by_node.get(node["metadata"]["name"], [])
                    if not p["metadata"].get("deletionTimestamp")]
            new = [p for p in pods if p["metadata"].get("labels", {}).get(
                REVISION_HASH_LABEL) == revision]
            old = [p for p in pods if p not in new]
            if len(pods) != 1:
                unavailable += 1
            elif new:
                unavailable += 0 if is_available(new[0], min_ready) else 1
            elif not is_available(old[0], min_ready):
                replace.append(old[0])
            else:
                candidates.append(old[0])
        for pod in [*replace, *candidates[:max(0, budget - unavailable)]]:
            await self._delete_pod(pod)

    async def _create_pod(self, daemon_set: dict[str, Any], node: str, revision: str) -> None:
        template = copy_json((daemon_set.get("spec") or {}).get("template") or {})
        metadata: dict[str, Any] = {**(template.get("metadata") or {}),
                                    "generateName": f"{daemon_set['metadata']['name']}-",
                                    "ownerReferences": [owner_reference(daemon_set)]}
        metadata.pop("name", None)
        labels = metadata.setdefault("labels", {})
        labels[REVISION_HASH_LABEL] = revision
        generation = (daemon_set["metadata"].get("annotations") or {}).get(
            TEMPLATE_GENERATION_ANNOTATION)
        if generation:
            labels[TEMPLATE_GENERATION_LABEL] = generation
        spec = template.get("spec") or {}
        spec["tolerations"] = daemon_tolerations(spec)
        spec["affinity"] = _node_affinity(spec.get("affinity"), node)
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
        try:
            await self.api.create(self.pods_kind, daemon_set["metadata"]["namespace"], pod)
        except StatusError as error:
            await record_event(self.api, daemon_set, "Warning", "FailedCreate",
                               f"Error creating: {error.message}", COMPONENT)
            if error.code != 403:  # refused (a terminating namespace, admission): the next
                raise              # change of the set, its pods or nodes tries again

    async def _delete_pod(self, pod: dict[str, Any]) -> None:
        try:
            await self.api.delete(self.pods_kind, pod["metadata"]["namespace"],
                                  pod["metadata"]["name"])
        except StatusError as error:
            if error.code != 404:
                raise

    async def _write_status(self, key: Key, revision: str) -> None:
        stored = self.api.store.get(self.sets_kind.storage_key, *key)
        if stored is None:
            return
        daemon_set = stored.obj
        min_ready = int((daemon_set.get("spec") or {}).get("minReadySeconds") or 0)
        by_node = self._pods_by_node(daemon_set)
        desired = current = misscheduled = ready = updated = available = 0
        for node in self._nodes():
            should_run, _ = node_should_run(node, daemon_set)
            pods = sorted(by_node.get(node["metadata"]["name"], []), key=_age_order)
            if not should_run:
                misscheduled += 1 if pods else 0
                continue
            desired += 1
            if not pods:
                continue
            current += 1
            ready += 1 if is_ready(pods[0]) else 0
            available += 1 if is_available(pods[0], min_ready) else 0
            updated += 1 if pods[0]["metadata"].get("labels", {}).get(
                REVISION_HASH_LABEL) == revision else 0
        status: dict[str, Any] = {
            "currentNumberScheduled": current, "numberMisscheduled": misscheduled,
            "desiredNumberScheduled": desired, "numberReady": ready,
            "observedGeneration": daemon_set["metadata"].get("generation", 1),
            "updatedNumberScheduled": updated, "numberAvailable": available,
            "numberUnavailable": desired - available,
        }
        status = {k: v for k, v in status.items() if v or k in (
            "currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled",
            "numberReady")}
        await replace_status(self.api, self.sets_kind, daemon_set, status)

    async def run(self) -> None:
        await run_together(
            watch_forever(self.api, self.sets_kind, self._on_set),
            watch_forever(self.api, self.nodes_kind, self._on_node),
            watch_forever(self.api, self.pods_kind, self._on_pod),
            self.queue.run(),
        )
