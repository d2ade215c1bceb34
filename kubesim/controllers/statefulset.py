"""StatefulSet controller, the part clients observe of pkg/controller/statefulset: pods named
`<set>-<ordinal>` with a stable hostname, one claim per volumeClaimTemplate and ordinal
(`<template>-<set>-<ordinal>`, created before the pod and kept when the pod goes), OrderedReady
(one pod at a time, each waiting for the previous to be Running and Ready; scale-down from the
highest ordinal, one at a time) or Parallel pod management, and the set's status.

Not simulated: rolling updates of a changed template (revisions, partitions); claims owned per
the retention policy's whenScaled.
"""

from __future__ import annotations

from typing import Any

from kubesim.apiserver import ApiServer, copy_json
from kubesim.controllers.base import Controller, WorkQueue, kind_of, run_together, watch_forever
from kubesim.controllers.events import record_event
from kubesim.controllers.replicaset import controller_of, is_ready, owner_reference
from kubesim.errors import StatusError
from kubesim.store import Stored

Obj = dict[str, Any]
Key = tuple[str, str]
COMPONENT = "statefulset-controller"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


def claim_name(template: Obj, set_name: str, ordinal: int) -> str:
    return f"{template['metadata']['name']}-{set_name}-{ordinal}"


def ordinal_of(set_name: str, pod_name: str) -> int | None:
    prefix, _, number = pod_name.rpartition("-")
    return int(number) if prefix == set_name and number.isdigit() else None


def stateful_pod(stateful_set: Obj, ordinal: int) -> Obj:
    """newVersionedStatefulSetPod: the template with the identity and the claims of `ordinal`."""
    meta, spec = stateful_set["metadata"], stateful_set.get("spec") or {}
    template = copy_json(spec.get("template") or {})
    name = f"{meta['name']}-{ordinal}"
    pod_meta: Obj = {**(template.get("metadata") or {}), "name": name,
                     "ownerReferences": [owner_reference(stateful_set)]}
    pod_meta.pop("generateName", None)
    pod_meta["labels"] = {**(pod_meta.get("labels") or {}), POD_NAME_LABEL: name,
                          POD_INDEX_LABEL: str(ordinal)}
    pod_spec: Obj = template.get("spec") or {}
    pod_spec["hostname"] = name
    if spec.get("serviceName"):
        pod_spec["subdomain"] = spec["serviceName"]
    templates = [t for t in spec.get("volumeClaimTemplates") or [] if isinstance(t, dict)]
    claimed = {t["metadata"]["name"] for t in templates}
    volumes = [v for v in pod_spec.get("volumes") or [] if v.get("name") not in claimed]
    volumes += [{"name": t["metadata"]["name"], "persistentVolumeClaim": {
        "claimName": claim_name(t, meta["name"], ordinal)}} for t in templates]
    if volumes:
        pod_spec["volumes"] = volumes
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec}


def stateful_claim(stateful_set: Obj, template: Obj, ordinal: int) -> Obj:
    """A claim from a volumeClaimTemplate: the set's selector labels added, owned by the set
    when the retention policy deletes claims with it."""
    meta, spec = stateful_set["metadata"], stateful_set.get("spec") or {}
    labels = {**((template.get("metadata") or {}).get("labels") or {}),
              **((spec.get("selector") or {}).get("matchLabels") or {})}
    claim_meta: Obj = {"name": claim_name(template, meta["name"], ordinal), "labels": labels}
    if (template.get("metadata") or {}).get("annotations"):
        claim_meta["annotations"] = dict(template["metadata"]["annotations"])
    policy = spec.get("persistentVolumeClaimRetentionPolicy") or {}
    if policy.get("whenDeleted") == "Delete":
        claim_meta["ownerReferences"] = [{**owner_reference(stateful_set),
                                          "blockOwnerDeletion": True, "controller": False}]
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": claim_meta,
            "spec": copy_json(template.get("spec") or {})}


def _running_and_ready(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and is_ready(pod)


def _finished(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


class StatefulSetController(Controller):
    name = "statefulset"

    def __init__(self, api: ApiServer) -> None:
        super().__init__(api)
        self.sets_kind = kind_of(api, "apps", "v1", "statefulsets")
        self.pods_kind = kind_of(api, "", "v1", "pods")
        self.claims_kind = kind_of(api, "", "v1", "persistentvolumeclaims")
        self.queue = WorkQueue(self._reconcile, self.name, workers=2)

    def _on_set(self, event_type: str, stored: Stored) -> None:
        self.queue.add((stored.namespace, stored.name))

    def _on_pod(self, event_type: str, stored: Stored) -> None:
        owner = controller_of(stored.obj, "StatefulSet")
        if owner is not None:
            self.queue.add((stored.namespace, owner["name"]))

    def _pods(self, stateful_set: Obj) -> dict[int, Obj]:
        uid, name = stateful_set["metadata"]["uid"], stateful_set["metadata"]["name"]
        pods: dict[int, Obj] = {}
        for stored in self.api.store.list(self.pods_kind.storage_key,
                                          stateful_set["metadata"]["namespace"]):
            ordinal = ordinal_of(name, stored.name)
            if ordinal is not None and (controller_of(stored.obj, "StatefulSet") or {}).get(
                    "uid") == uid:
                pods[ordinal] = stored.obj
        return pods

    async def _reconcile(self, key: Key) -> None:
        stored = self.api.store.get(self.sets_kind.storage_key, *key)
        if stored is None or stored.obj["metadata"].get("deletionTimestamp"):
            return
        stateful_set = stored.obj
        spec = stateful_set.get("spec") or {}
        replicas = int(spec.get("replicas", 1))
        ordered = spec.get("podManagementPolicy", "OrderedReady") == "OrderedReady"
        pods = self._pods(stateful_set)
        for ordinal in range(replicas):
            pod = pods.get(ordinal)
            if pod is not None and _finished(pod) and not pod["metadata"].get(
                    "deletionTimestamp"):
                await self._delete_pod(stateful_set, pod)  # recreated on a later pass
                if ordered:
                    break
                continue
            if pod is None:
                await self._create_pod(stateful_set, ordinal)
                if ordered:
                    break
                continue
            if ordered and (pod["metadata"].get("deletionTimestamp")
                            or not _running_and_ready(pod)):
                break
        else:
            condemned = sorted((o for o in pods if o >= replicas), reverse=True)
            healthy = all(_running_and_ready(pods[o]) for o in pods if o < replicas)
            for ordinal in condemned:
                pod = pods[ordinal]
                if ordered and not healthy:
                    break
                if not pod["metadata"].get("deletionTimestamp"):
                    await self._delete_pod(stateful_set, pod)
                if ordered:
                    break  # one at a time, each gone before the next
        await self._write_status(key)

    async def _create_pod(self, stateful_set: Obj, ordinal: int) -> None:
        namespace, set_name = stateful_set["metadata"]["namespace"], stateful_set["metadata"][
            "name"]
        pod = stateful_pod(stateful_set, ordinal)
        for template in (stateful_set.get("spec") or {}).get("volumeClaimTemplates") or []:
            claim = stateful_claim(stateful_set, template, ordinal)
            if self.api.store.get(self.claims_kind.storage_key, namespace,
                                  claim["metadata"]["name"]) is not None:
                continue
            try:
                await self.api.create(self.claims_kind, namespace, claim)
            except StatusError as error:
                if error.code == 409:
                    continue
                await record_event(self.api, stateful_set, "Warning", "FailedCreate",
                                   f"create Claim {claim['metadata']['name']} for Pod "
                                   f"{pod['metadata']['name']} in StatefulSet {set_name} "
                                   f"failed error: {error}", component=COMPONENT)
                raise
            await record_event(self.api, stateful_set, "Normal", "SuccessfulCreate",
                               f"create Claim {claim['metadata']['name']} Pod "
                               f"{pod['metadata']['name']} in StatefulSet {set_name} success",
                               component=COMPONENT)
        try:
            await self.api.create(self.pods_kind, namespace, pod)
        except StatusError as error:
            if error.code in (403, 409):  # terminating namespace, or the old pod still there
                return
            raise
        await record_event(self.api, stateful_set, "Normal", "SuccessfulCreate",
                           f"create Pod {pod['metadata']['name']} in StatefulSet {set_name} "
                           f"successful", component=COMPONENT)

    async def _delete_pod(self, stateful_set: Obj, pod: Obj) -> None:
        try:
            await self.api.delete(self.pods_kind, pod["metadata"]["namespace"],
                                  pod["metadata"]["name"])
        except StatusError as error:
            if error.code == 404:
                return
            raise
        await record_event(self.api, stateful_set, "Normal", "SuccessfulDelete",
                           f"delete Pod {pod['metadata']['name']} in StatefulSet "
                           f"{stateful_set['metadata']['name']} successful", component=COMPONENT)

    async def _write_status(self, key: Key) -> None:
        stored = self.api.store.get(self.sets_kind.storage_key, *key)
        if stored is None:
            return
        stateful_set = stored.obj
        pods = [p for p in self._pods(stateful_set).values()
                if not p["metadata"].get("deletionTimestamp") and not _finished(p)]
        ready = sum(1 for p in pods if _running_and_ready(p))
        status: Obj = {
            "observedGeneration": stateful_set["metadata"].get("generation", 1),
            "replicas": len(pods), "readyReplicas": ready, "currentReplicas": len(pods),
            "updatedReplicas": len(pods), "availableReplicas": ready, "collisionCount": 0,
        }
        status = {k: v for k, v in status.items()
                  if v or k in ("replicas", "availableReplicas", "observedGeneration")}
        if (stateful_set.get("status") or {}) == status:
            return
        new = copy_json(stateful_set)
        new["status"] = status
        await self.api.update(self.sets_kind, *key, new, subresource="status")

    async def run(self) -> None:
        await run_together(
            watch_forever(self.api, self.sets_kind, self._on_set),
            watch_forever(self.api, self.pods_kind, self._on_pod),
            self.queue.run(),
        )
