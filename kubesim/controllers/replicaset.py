"""ReplicaSet controller: keeps `spec.replicas` live pods from the template, owned by the set,
and reports replicas / fullyLabeledReplicas / readyReplicas / availableReplicas /
observedGeneration in its status."""

from __future__ import annotations

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
from kubesim.errors import StatusError
from kubesim.selectors import label_selector_from_object
from kubesim.store import Stored

Key = tuple[str, str]


def controller_of(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The ownerReference marked controller, if it is of this kind."""
    for reference in obj["metadata"].get("ownerReferences") or []:
        if reference.get("controller") and reference.get("kind") == kind:
            return dict(reference)
    return None


def owner_reference(owner: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"],
            "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}


def is_ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _is_active(pod: dict[str, Any]) -> bool:
    return (not pod["metadata"].get("deletionTimestamp")
            and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))


def _deletion_rank(pod: dict[str, Any]) -> tuple[int, int, str]:
    """Which pods go first when scaling down: unscheduled, then not ready, then newest."""
    scheduled = 1 if (pod.get("spec") or {}).get("nodeName") else 0
    return (scheduled, 1 if is_ready(pod) else 0,
            _reverse(pod["metadata"].get("creationTimestamp") or ""))


def _reverse(text: str) -> str:
    return "".join(chr(0x10FFFF - ord(c)) for c in text)


class ReplicaSetController(Controller):
    name = "replicaset"

    def __init__(self, api: ApiServer) -> None:
        super().__init__(api)
        self.sets_kind = kind_of(api, "apps", "v1", "replicasets")
        self.pods_kind = kind_of(api, "", "v1", "pods")
        self.queue = WorkQueue(self._reconcile, self.name, workers=2)

    def _on_set(self, event_type: str, stored: Stored) -> None:
        self.queue.add((stored.namespace, stored.name))

    def _on_pod(self, event_type: str, stored: Stored) -> None:
        owner = controller_of(stored.obj, "ReplicaSet")
        if owner is not None:
            self.queue.add((stored.namespace, owner["name"]))

    def _owned_pods(self, replica_set: dict[str, Any]) -> list[dict[str, Any]]:
        uid = replica_set["metadata"]["uid"]
        namespace = replica_set["metadata"]["namespace"]
        return [p.obj for p in self.api.store.list(self.pods_kind.storage_key, namespace)
                if (controller_of(p.obj, "ReplicaSet") or {}).get("uid") == uid]

    async def _reconcile(self, key: Key) -> None:
        stored = self.api.store.get(self.sets_kind.storage_key, *key)
        if stored is None:
            return
        replica_set = stored.obj
        pods = self._owned_pods(replica_set)
        active = [p for p in pods if _is_active(p)]
        if not replica_set["metadata"].get("deletionTimestamp"):
            wanted = int((replica_set.get("spec") or {}).get("replicas", 1))
            if len(active) < wanted:
                for _ in range(wanted - len(active)):
                    await self._create_pod(replica_set)
            elif len(active) > wanted:
                for pod in sorted(active, key=_deletion_rank)[: len(active) - wanted]:
                    await self._delete_pod(pod)
        await self._write_status(key)

    async def _create_pod(self, replica_set: dict[str, Any]) -> None:
        template = copy_json((replica_set.get("spec") or {}).get("template") or {})
        metadata: dict[str, Any] = {
            **(template.get("metadata") or {}),
            "generateName": f"{replica_set['metadata']['name']}-",
            "ownerReferences": [owner_reference(replica_set)]}
        metadata.pop("name", None)
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
               "spec": template.get("spec") or {}}
        try:
            await self.api.create(self.pods_kind, replica_set["metadata"]["namespace"], pod)
        except StatusError as error:
            if error.code != 403:  # the namespace is terminating
                raise

    async def _delete_pod(self, pod: dict[str, Any]) -> None:
        try:
            await self.api.delete(self.pods_kind, pod["metadata"]["namespace"],
                                  pod["metadata"]["name"])
        except StatusError as error:
            if error.code != 404:
                raise

    async def _write_status(self, key: Key) -> None:
        stored = self.api.store.get(self.sets_kind.storage_key, *key)
        if stored is None:
            return
        replica_set = stored.obj
        active = [p for p in self._owned_pods(replica_set) if _is_active(p)]
        template_labels = (((replica_set.get("spec") or {}).get("template") or {})
                           .get("metadata") or {}).get("labels") or {}
        labelled = label_selector_from_object({"matchLabels": template_labels})
        ready = sum(1 for p in active if is_ready(p))
        status: dict[str, Any] = {
            "replicas": len(active),
            "fullyLabeledReplicas": sum(1 for p in active
                                        if labelled.matches(p["metadata"].get("labels"))),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "observedGeneration": replica_set["metadata"].get("generation", 1),
        }
        status = {k: v for k, v in status.items() if v or k in ("replicas",
                                                                "observedGeneration")}
        await replace_status(self.api, self.sets_kind, replica_set, status)

    async def run(self) -> None:
        await run_together(
            watch_forever(self.api, self.sets_kind, self._on_set),
            watch_forever(self.api, self.pods_kind, self._on_pod),
            self.queue.run(),
        )
