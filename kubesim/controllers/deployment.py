"""Deployment controller: one ReplicaSet per pod template (named `<deployment>-<hash>`, with the
`pod-template-hash` label), the current one scaled to `spec.replicas` and the old ones to zero
(RollingUpdate: once the new one is available; Recreate: the old ones first), and the status
replicas / updatedReplicas / readyReplicas / availableReplicas / observedGeneration with the
Available and Progressing conditions."""

from __future__ import annotations

import json
from typing import Any

from kubesim.apiserver import ApiServer, copy_json, now_timestamp
from kubesim.controllers.base import (
    Controller,
    WorkQueue,
    kind_of,
    replace_status,
    run_together,
    watch_forever,
)
from kubesim.controllers.replicaset import controller_of, owner_reference
from kubesim.errors import StatusError
from kubesim.store import Stored

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
_SAFE = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery rand.SafeEncodeString's alphabet
Key = tuple[str, str]


def template_hash(template: dict[str, Any], collisions: int = 0) -> str:
    """FNV-1a 32 of the template, its decimal digits encoded as rand.SafeEncodeString does."""
    value = 0x811C9DC5
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    for byte in data + (str(collisions).encode() if collisions else b""):
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE[ord(c) % len(_SAFE)] for c in str(value))


def _replicas(obj: dict[str, Any]) -> int:
    return int((obj.get("spec") or {}).get("replicas", 1))


def _status(obj: dict[str, Any], field: str) -> int:
    return int((obj.get("status") or {}).get(field, 0))


class DeploymentController(Controller):
    name = "deployment"

    def __init__(self, api: ApiServer) -> None:
        super().__init__(api)
        self.deployments_kind = kind_of(api, "apps", "v1", "deployments")
        self.sets_kind = kind_of(api, "apps", "v1", "replicasets")
        self.queue = WorkQueue(self._reconcile, self.name, workers=2)

    def _on_deployment(self, event_type: str, stored: Stored) -> None:
        self.queue.add((stored.namespace, stored.name))

    def _on_set(self, event_type: str, stored: Stored) -> None:
        owner = controller_of(stored.obj, "Deployment")
        if owner is not None:
            self.queue.add((stored.namespace, owner["name"]))

    def _owned_sets(self, deployment: dict[str, Any]) -> list[dict[str, Any]]:
        uid = deployment["metadata"]["uid"]
        return [s.obj for s in self.api.store.list(self.sets_kind.storage_key,
                                                   deployment["metadata"]["namespace"])
                if (controller_of(s.obj, "Deployment") or {}).get("uid") == uid]

    async def _reconcile(self, key: Key) -> None:
        stored = self.api.store.get(self.deployments_kind.storage_key, *key)
        if stored is None or stored.obj["metadata"].get("deletionTimestamp"):
            return
        deployment = stored.obj
        spec = deployment.get("spec") or {}
        template_hash_value = template_hash(spec.get("template") or {})
        sets = self._owned_sets(deployment)
        new = next((s for s in sets if (s["metadata"].get("labels") or {}).get(HASH_LABEL)
                    == template_hash_value), None)
        olds = [s for s in sets if s is not new]
        recreate = (spec.get("strategy") or {}).get("type") == "Recreate"
        desired = _replicas(deployment)
        olds_running = sum(_status(s, "replicas") for s in olds)
        if new is None:
            revision = 1 + max((int((s["metadata"].get("annotations") or {}).get(REVISION, 0))
                                for s in olds), default=0)
            initial = 0 if recreate and olds_running else desired
            new = await self._create_set(deployment, template_hash_value, revision, initial)
        elif not (recreate and olds_running):
            await self._scale(new, desired)
        if new is not None and (recreate or _status(new, "availableReplicas") >= desired):
            for old in olds:
                await self._scale(old, 0)
        await self._write_status(key, new)

    async def _create_set(self, deployment: dict[str, Any], hash_value: str, revision: int,
                          replicas: int) -> dict[str, Any] | None:
        spec = deployment.get("spec") or {}
        template = copy_json(spec.get("template") or {})
        template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = hash_value
        selector = copy_json(spec.get("selector") or {})
        selector.setdefault("matchLabels", {})[HASH_LABEL] = hash_value
        name = f"{deployment['metadata']['name']}-{hash_value}"
        replica_set = {
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "labels": dict(template["metadata"]["labels"]),
                         "annotations": {REVISION: str(revision),
                                         "deployment.kubernetes.io/desired-replicas":
                                             str(_replicas(deployment))},
                         "ownerReferences": [owner_reference(deployment)]},
            "spec": {"replicas": replicas, "selector": selector, "template": template,
                     "minReadySeconds": spec.get("minReadySeconds", 0)},
        }
        try:
            return await self.api.create(self.sets_kind, deployment["metadata"]["namespace"],
                                         replica_set)
        except StatusError as error:
            if error.code in (403, 409):  # namespace terminating / created meanwhile
                return None
            raise

    async def _scale(self, replica_set: dict[str, Any], replicas: int) -> None:
        if _replicas(replica_set) == replicas:
            return
        new = copy_json(replica_set)
        new["spec"]["replicas"] = replicas
        await self.api.update(self.sets_kind, new["metadata"]["namespace"],
                              new["metadata"]["name"], new)

    async def _write_status(self, key: Key, new_set: dict[str, Any] | None) -> None:
        stored = self.api.store.get(self.deployments_kind.storage_key, *key)
        if stored is None:
            return
        deployment = stored.obj
        sets = self._owned_sets(deployment)
        current = next((s for s in sets if new_set is not None
                        and s["metadata"]["uid"] == new_set["metadata"]["uid"]), None)
        desired = _replicas(deployment)
        available = sum(_status(s, "availableReplicas") for s in sets)
        updated = _status(current, "replicas") if current else 0
        total = sum(_status(s, "replicas") for s in sets)
        done = current is not None and updated == desired == total and available >= desired
        set_name = current["metadata"]["name"] if current else ""
        old_conditions = {c.get("type"): c for c in
                          (deployment.get("status") or {}).get("conditions") or []}

        def condition(kind: str, ok: bool, reason: str, message: str) -> dict[str, Any]:
            status = "True" if ok else "False"
            before = old_conditions.get(kind, {})
            same = before.get("status") == status and before.get("reason") == reason
            now = now_timestamp()
            return {"type": kind, "status": status, "reason": reason, "message": message,
                    "lastUpdateTime": before.get("lastUpdateTime", now) if same else now,
                    "lastTransitionTime": before.get("lastTransitionTime", now)
                    if before.get("status") == status else now}

        status: dict[str, Any] = {
            "observedGeneration": deployment["metadata"].get("generation", 1),
            "replicas": total, "updatedReplicas": updated,
            "readyReplicas": sum(_status(s, "readyReplicas") for s in sets),
            "availableReplicas": available,
            "unavailableReplicas": max(total - available, desired - available, 0),
            "conditions": [
                condition("Available", available >= desired,
                          "MinimumReplicasAvailable" if available >= desired
                          else "MinimumReplicasUnavailable",
                          "Deployment has minimum availability." if available >= desired
                          else "Deployment does not have minimum availability."),
                condition("Progressing", True,
                          "NewReplicaSetAvailable" if done else "ReplicaSetUpdated",
                          f'ReplicaSet "{set_name}" has successfully progressed.' if done
                          else f'ReplicaSet "{set_name}" is progressing.'),
            ],
        }
        status = {k: v for k, v in status.items() if v or k == "observedGeneration"}
        await replace_status(self.api, self.deployments_kind, deployment, status)

    async def run(self) -> None:
        await run_together(
            watch_forever(self.api, self.deployments_kind, self._on_deployment),
            watch_forever(self.api, self.sets_kind, self._on_set),
            self.queue.run(),
        )
