"""Simulated dynamic provisioners, as a cluster's storage add-ons run them (kind's
local-path-provisioner, a CSI driver's external-provisioner and external-resizer sidecars).

Each serves the claims the PV controller hands to it (`volume.kubernetes.io/storage-provisioner`
names it; a WaitForFirstConsumer claim also needs `volume.kubernetes.io/selected-node`): it
records Provisioning, creates the volume `pvc-<claim uid>` pre-bound to the claim and records
ProvisioningSucceeded (or ProvisioningFailed, when the class's simulated capacity is exhausted);
it deletes the volumes it made once Released with reclaim policy Delete; the CSI one expands a
bound claim whose class allows it as external-resizer does (the Resizing condition and Event,
the volume's capacity, then the claim's and VolumeResizeSuccessful; or, for a class asking for
node expansion, FileSystemResizePending until a running pod mounts the claim, when the node's
part, simulated here, finishes it: FileSystemResizeSuccessful).

On first start the add-on installs kind's default class, `standard` (rancher.io/local-path,
WaitForFirstConsumer), as kind's storage manifest does.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from kubesim.apiserver import ApiServer, copy_json, now_timestamp
from kubesim.controllers.base import Controller, WorkQueue, kind_of, run_together, watch_forever
from kubesim.controllers.events import record_event
from kubesim.controllers.persistentvolume import (
    PROVISIONED_BY,
    SELECTED_NODE,
    STORAGE_PROVISIONER,
    claim_key,
    pod_claim_names,
    requested_storage,
)
from kubesim.errors import StatusError
from kubesim.quantity import parse_quantity
from kubesim.store import Stored
from kubesim.strategies import DEFAULT_CLASS_ANNOTATION

Obj = dict[str, Any]
LOCAL_PATH = "rancher.io/local-path"
SIMULATED_CSI = "csi.kubesim.io"
# a class parameter bounding what the simulated backend can hold for the class (bytes or a
# quantity): past it, provisioning fails as a full backend's would
CAPACITY_PARAMETER = "kubesim.io/capacity"
# a class parameter ("true"): the simulated CSI driver grows the file system on the node
# (ControllerExpandVolume's node_expansion_required), once a running pod mounts the claim
NODE_EXPANSION_PARAMETER = "kubesim.io/node-expansion"
RESIZE_CONDITIONS = ("Resizing", "FileSystemResizePending")
CONTROLLER_RESIZE_IN_PROGRESS = "ControllerResizeInProgress"
NODE_RESIZE_PENDING = "NodeResizePending"
FS_RESIZE_PENDING_MESSAGE = ("Waiting for user to (re-)start a pod to finish file system resize "
                             "of volume on node.")
HOSTNAME_LABEL = "kubernetes.io/hostname"


def _resize_condition(kind: str, message: str = "") -> Obj:
    return {"type": kind, "status": "True", "lastTransitionTime": now_timestamp(),
            **({"message": message} if message else {})}


@dataclass(frozen=True)
class Backend:
    """What one simulated provisioner writes: a node-local path or a CSI volume."""

    name: str
    local: bool
    expandable: bool

    def source(self, volume_name: str, claim: Obj) -> Obj:
        if self.local:
            namespace, name = claim_key(claim)
            return {"hostPath": {"path": f"/var/local-path-provisioner/{volume_name}_"
                                         f"{namespace}_{name}", "type": "DirectoryOrCreate"}}
        return {"csi": {"driver": self.name, "volumeHandle": volume_name, "fsType": "ext4"}}


BACKENDS = {b.name: b for b in (Backend(LOCAL_PATH, local=True, expandable=False),
                                Backend(SIMULATED_CSI, local=False, expandable=True))}
STANDARD_CLASS: Obj = {
    "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
    "metadata": {"name": "standard", "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}},
    "provisioner": LOCAL_PATH, "reclaimPolicy": "Delete",
    "volumeBindingMode": "WaitForFirstConsumer",
}


def provisioned_volume(backend: Backend, storage_class: Obj, claim: Obj) -> Obj:
    """The volume an external provisioner creates for a claim: named after the claim's uid,
    pre-bound to it, with the class's reclaim policy and mount options and, for a node-local
    backend, a required node affinity to the selected node."""
    meta, spec = claim["metadata"], claim.get("spec") or {}
    name = f"pvc-{meta['uid']}"
    volume_spec: Obj = {
        "accessModes": list(spec.get("accessModes") or []),
        "capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {})[
            "storage"]},
        "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                     "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"],
                     "resourceVersion": meta.get("resourceVersion", "")},
        "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
        "storageClassName": storage_class["metadata"]["name"],
        "volumeMode": spec.get("volumeMode") or "Filesystem",
        **backend.source(name, claim),
    }
    if storage_class.get("mountOptions"):
        volume_spec["mountOptions"] = list(storage_class["mountOptions"])
    node = (meta.get("annotations") or {}).get(SELECTED_NODE)
    if backend.local and node:
        volume_spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": HOSTNAME_LABEL, "operator": "In", "values": [node]}]}]}}
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {PROVISIONED_BY: backend.name}},
            "spec": volume_spec}


class StorageProvisioner(Controller):
    name = "storage-provisioner"

    def __init__(self, api: ApiServer) -> None:
        super().__init__(api)
        self.claims_kind = kind_of(api, "", "v1", "persistentvolumeclaims")
        self.volumes_kind = kind_of(api, "", "v1", "persistentvolumes")
        self.classes_kind = kind_of(api, "storage.k8s.io", "v1", "storageclasses")
        self.pods_kind = kind_of(api, "", "v1", "pods")
        self.claims = WorkQueue(self._sync_claim, f"{self.name}-claims", workers=2)
        self.volumes = WorkQueue(self._sync_volume, f"{self.name}-volumes")

    def _class(self, name: str) -> Obj | None:
        stored = self.api.store.get(self.classes_kind.storage_key, "", name) if name else None
        return stored.obj if stored is not None else None

    def _on_claim(self, event_type: str, stored: Stored) -> None:
        if event_type != "DELETED":
            self.claims.add((stored.namespace, stored.name))

    def _on_volume(self, event_type: str, stored: Stored) -> None:
        if event_type != "DELETED":
            self.volumes.add(stored.name)

    def _on_pod(self, event_type: str, stored: Stored) -> None:
        """A pod's claims: one waiting for its file system to grow may now be mounted."""
        for name in pod_claim_names(stored.obj):
            self.claims.add((stored.namespace, name))

    def _used(self, class_name: str) -> Decimal:
        return sum((parse_quantity(((v.obj.get("spec") or {}).get("capacity") or {}).get(
            "storage", "0")) for v in self.api.store.iterate(self.volumes_kind.storage_key)
            if (v.obj.get("spec") or {}).get("storageClassName") == class_name), Decimal(0))

    async def _sync_claim(self, key: tuple[str, str]) -> None:
        stored = self.api.store.get(self.claims_kind.storage_key, *key)
        if stored is None or stored.obj["metadata"].get("deletionTimestamp"):
            return
        claim = stored.obj
        annotations = claim["metadata"].get("annotations") or {}
        backend = BACKENDS.get(str(annotations.get(STORAGE_PROVISIONER) or ""))
        storage_class = self._class(str((claim.get("spec") or {}).get("storageClassName") or ""))
        if backend is None or storage_class is None or storage_class.get(
                "provisioner") != backend.name:
            return
        if (claim.get("status") or {}).get("phase") == "Bound":
            await self._expand(backend, storage_class, claim)
            return
        if (claim.get("spec") or {}).get("volumeName"):
            return
        if storage_class.get("volumeBindingMode") == "WaitForFirstConsumer" and not (
                annotations.get(SELECTED_NODE)):
            return
        volume = provisioned_volume(backend, storage_class, claim)
        if self.api.store.get(self.volumes_kind.storage_key, "", volume["metadata"]["name"]):
            return  # made already; the binder binds it
        namespace, name = key
        await record_event(self.api, claim, "Normal", "Provisioning",
                           f'External provisioner is provisioning volume for claim '
                           f'"{namespace}/{name}"', component=backend.name)
        limit = (storage_class.get("parameters") or {}).get(CAPACITY_PARAMETER)
        if limit is not None and self._used(storage_class["metadata"]["name"]) + \
                requested_storage(claim) > parse_quantity(limit):
            await record_event(
                self.api, claim, "Warning", "ProvisioningFailed",
                f'failed to provision volume with StorageClass '
                f'"{storage_class["metadata"]["name"]}": rpc error: code = ResourceExhausted '
                f'desc = insufficient capacity', component=backend.name)
            self.claims.add_later(key, 5.0)  # the external provisioner retries with back-off
            return
        try:
            await self.api.create(self.volumes_kind, "", volume)
        except StatusError as error:
            if error.code != 409:
                raise
            return
        await record_event(self.api, claim, "Normal", "ProvisioningSucceeded",
                           f"Successfully provisioned volume {volume['metadata']['name']}",
                           component=backend.name)

    async def _expand(self, backend: Backend, storage_class: Obj, claim: Obj) -> None:
        """external-resizer: a bound claim asking for more than its capacity grows — Resizing
        (the condition, allocatedResources, allocatedResourceStatuses ControllerResizeInProgress),
        the volume's capacity, then done (capacity, resize conditions gone) or, for a class whose
        driver grows the file system on the node (`NODE_EXPANSION_PARAMETER`),
        FileSystemResizePending until the node does (`_expand_on_node`)."""
        status = claim.get("status") or {}
        capacity = (status.get("capacity") or {}).get("storage")
        if capacity is None or requested_storage(claim) <= parse_quantity(capacity):
            return
        if not backend.expandable or not storage_class.get("allowVolumeExpansion"):
            return
        volume_name = str((claim.get("spec") or {}).get("volumeName") or "")
        stored = self.api.store.get(self.volumes_kind.storage_key, "", volume_name)
        if stored is None:
            return
        size = ((claim.get("spec") or {}).get("resources") or {}).get("requests", {})["storage"]
        if (status.get("allocatedResourceStatuses") or {}).get("storage") == NODE_RESIZE_PENDING:
            if parse_quantity(stored.obj["spec"]["capacity"]["storage"]) >= parse_quantity(size):
                await self._expand_on_node(claim, stored.obj)
                return
        component = "external-resizer " + backend.name
        claim = await self._resize_status(
            claim, [_resize_condition("Resizing")], CONTROLLER_RESIZE_IN_PROGRESS,
            allocatedResources={"storage": size})
        await record_event(self.api, claim, "Normal", "Resizing",
                           f"External resizer is resizing volume {volume_name}",
                           component=component)
        volume = copy_json(stored.obj)
        volume["spec"]["capacity"]["storage"] = size
        await self.api.update(self.volumes_kind, "", volume_name, volume)
        if (storage_class.get("parameters") or {}).get(NODE_EXPANSION_PARAMETER) == "true":
            await self._resize_status(claim, [_resize_condition(
                "FileSystemResizePending", FS_RESIZE_PENDING_MESSAGE)], NODE_RESIZE_PENDING)
            await record_event(self.api, claim, "Normal", "FileSystemResizeRequired",
                               "Require file system resize of volume on node",
                               component=component)
            return
        await self._resize_status(claim, [], None, capacity={"storage": size})
        await record_event(self.api, claim, "Normal", "VolumeResizeSuccessful",
                           "Resize volume succeeded", component=component)

    async def _expand_on_node(self, claim: Obj, volume: Obj) -> None:
        """The kubelet's part (NodeExpandVolume), simulated here: once a running pod mounts the
        claim, its file system grows to the volume's capacity and the claim shows it."""
        namespace, name = claim_key(claim)
        pod = next((p.obj for p in self.api.store.list(self.pods_kind.storage_key, namespace)
                    if (p.obj.get("spec") or {}).get("nodeName")
                    and (p.obj.get("status") or {}).get("phase") == "Running"
                    and name in pod_claim_names(p.obj)), None)
        if pod is None:
            return  # "Waiting for user to (re-)start a pod"
        await self._resize_status(claim, [], None,
                                  capacity={"storage": volume["spec"]["capacity"]["storage"]})
        node = pod["spec"]["nodeName"]
        message = (f'MountVolume.NodeExpandVolume succeeded for volume '
                   f'"{volume["metadata"]["name"]}" {node}')
        for regarding in (pod, claim):
            await record_event(self.api, regarding, "Normal", "FileSystemResizeSuccessful",
                               message, component="kubelet", host=node)

    async def _resize_status(self, claim: Obj, conditions: list[Obj], resize_status: str | None,
                             **fields: Obj) -> Obj:
        """The claim's status with these resize conditions in place of the ones it had, the
        storage's allocatedResourceStatuses (None: none), and `fields` (util.MergeResizeConditions
        OfPVC and the resizer's status patches)."""
        new = copy_json(claim)
        status = new.setdefault("status", {})
        status["conditions"] = [c for c in status.get("conditions") or []
                                if c.get("type") not in RESIZE_CONDITIONS] + conditions
        statuses = {k: v for k, v in (status.get("allocatedResourceStatuses") or {}).items()
                    if k != "storage"}
        if resize_status is not None:
            statuses["storage"] = resize_status
        if statuses:
            status["allocatedResourceStatuses"] = statuses
        else:
            status.pop("allocatedResourceStatuses", None)
        for key, value in fields.items():
            status[key] = {**(status.get(key) or {}), **value}
        return await self.api.update(self.claims_kind, *claim_key(claim), new,
                                     subresource="status")

    async def _sync_volume(self, name: str) -> None:
        stored = self.api.store.get(self.volumes_kind.storage_key, "", name)
        if stored is None:
            return
        volume = stored.obj
        backend = BACKENDS.get(str((volume["metadata"].get("annotations") or {}).get(
            PROVISIONED_BY) or ""))
        if backend is None or (volume.get("status") or {}).get("phase") != "Released":
            return
        if (volume.get("spec") or {}).get("persistentVolumeReclaimPolicy") != "Delete":
            return
        try:
            await self.api.delete(self.volumes_kind, "", name)
        except StatusError as error:
            if error.code != 404:
                raise

    async def _install_default_class(self) -> None:
        try:
            await self.api.create(self.classes_kind, "", copy_json(STANDARD_CLASS))
        except StatusError as error:
            if error.code != 409:
                raise

    async def run(self) -> None:
        await self._install_default_class()
        await run_together(
            watch_forever(self.api, self.claims_kind, self._on_claim),
            watch_forever(self.api, self.volumes_kind, self._on_volume),
            watch_forever(self.api, self.pods_kind, self._on_pod),
            self.claims.run(), self.volumes.run(),
        )
