"""The PersistentVolume controllers of kube-controller-manager: the binder
(persistentvolume-binder), and the pvc-protection and pv-protection finalizer controllers.

The binder pairs claims with volumes the way pkg/controller/volume/persistentvolume does, as
far as a client can observe: a claim of an Immediate class binds to a matching Available volume
or is handed to its class's provisioner (the `volume.kubernetes.io/storage-provisioner`
annotation and an ExternalProvisioning Event); a claim of a WaitForFirstConsumer class waits
(a WaitForFirstConsumer Event) until the scheduler names a node (`volume.kubernetes.io/
selected-node`); a volume pre-bound to a claim (what a provisioner creates) is bound to it;
a bound claim whose volume is gone is Lost; a volume whose claim is gone is Released, then
kept (Retain) or left to its provisioner to delete (Delete).
"""

from __future__ import annotations

from typing import Any

from kubesim.apiserver import ApiServer, copy_json
from kubesim.controllers.base import Controller, WorkQueue, kind_of, run_together, watch_forever
from kubesim.controllers.events import record_event
from kubesim.controllers.placement import node_selector_matches
from kubesim.errors import StatusError
from kubesim.quantity import parse_quantity
from kubesim.selectors import label_selector_from_object
from kubesim.store import Stored
from kubesim.strategies import PV_PROTECTION_FINALIZER, PVC_PROTECTION_FINALIZER

Obj = dict[str, Any]
COMPONENT = "persistentvolume-controller"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
CLAIM_LOST_MESSAGE = "Bound claim has lost its PersistentVolume. Data on the volume is lost!"
WAITING_MESSAGE = "waiting for first consumer to be created before binding"
NO_CLASS_MESSAGE = "no persistent volumes available for this claim and no storage class is set"


def external_provisioning_message(provisioner: str) -> str:
    return (f'Waiting for a volume to be created either by the external provisioner '
            f'"{provisioner}" or manually by the system administrator. If volume creation is '
            f'delayed, please verify that the provisioner is running and correctly registered.')


def claim_key(claim: Obj) -> tuple[str, str]:
    return (str(claim["metadata"].get("namespace", "")), str(claim["metadata"]["name"]))


def requested_storage(claim: Obj) -> Any:
    return parse_quantity(((claim.get("spec") or {}).get("resources") or {}).get(
        "requests", {}).get("storage", "0"))


def volume_matches_claim(volume: Obj, claim: Obj, node: Obj | None) -> bool:
    """findMatchingVolume's checks for an unbound volume: class, volume mode, access modes,
    size, the claim's selector and, for a claim waiting on a node, the volume's node affinity."""
    spec, claim_spec = volume.get("spec") or {}, claim.get("spec") or {}
    if spec.get("claimRef") or (volume.get("status") or {}).get("phase") != "Available":
        return False
    if volume["metadata"].get("deletionTimestamp"):
        return False
    if (spec.get("storageClassName") or "") != (claim_spec.get("storageClassName") or ""):
        return False
    if (spec.get("volumeMode") or "Filesystem") != (claim_spec.get("volumeMode") or "Filesystem"):
        return False
    if not set(claim_spec.get("accessModes") or []) <= set(spec.get("accessModes") or []):
        return False
    if parse_quantity((spec.get("capacity") or {}).get("storage", "0")) < requested_storage(
            claim):
        return False
    selector = claim_spec.get("selector")
    if selector is not None and not label_selector_from_object(selector).matches(
            volume["metadata"].get("labels")):
        return False
    return node is None or volume_fits_node(volume, node)


def volume_fits_node(volume: Obj, node: Obj) -> bool:
    """The volume's required node affinity (CheckNodeAffinity); none fits every node."""
    required = ((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required")
    return required is None or node_selector_matches(required, node)


class PersistentVolumeBinder(Controller):
    name = "persistentvolume-binder"

    def __init__(self, api: ApiServer) -> None:
        super().__init__(api)
        self.claims_kind = kind_of(api, "", "v1", "persistentvolumeclaims")
        self.volumes_kind = kind_of(api, "", "v1", "persistentvolumes")
        self.classes_kind = kind_of(api, "storage.k8s.io", "v1", "storageclasses")
        self.nodes_kind = kind_of(api, "", "v1", "nodes")
        self.claims = WorkQueue(self._sync_claim, f"{self.name}-claims", workers=2)
        self.volumes = WorkQueue(self._sync_volume, f"{self.name}-volumes", workers=2)
        # (uid, reason, message) of the Events already recorded: the real controller records
        # on every sync and the recorder folds repeats into a count; one is enough here
        self._recorded: set[tuple[str, str, str]] = set()

    # ---------------------------------------------------------------------------- reads
    def _get(self, kind_key: tuple[str, str], namespace: str, name: str) -> Obj | None:
        stored = self.api.store.get(kind_key, namespace, name)
        return stored.obj if stored is not None else None

    def _claim(self, namespace: str, name: str) -> Obj | None:
        return self._get(self.claims_kind.storage_key, namespace, name)

    def _volume(self, name: str) -> Obj | None:
        return self._get(self.volumes_kind.storage_key, "", name)

    def _class(self, name: str) -> Obj | None:
        return self._get(self.classes_kind.storage_key, "", name) if name else None

    # --------------------------------------------------------------------------- events
    def _on_claim(self, event_type: str, stored: Stored) -> None:
        self.claims.add((stored.namespace, stored.name))
        volume = (stored.obj.get("spec") or {}).get("volumeName")
        if volume:
            self.volumes.add(volume)
        if event_type == "DELETED":
            for candidate in self.api.store.iterate(self.volumes_kind.storage_key):
                ref = (candidate.obj.get("spec") or {}).get("claimRef") or {}
                if (ref.get("namespace"), ref.get("name")) == (stored.namespace, stored.name):
                    self.volumes.add(candidate.name)

    def _on_volume(self, event_type: str, stored: Stored) -> None:
        self.volumes.add(stored.name)
        ref = (stored.obj.get("spec") or {}).get("claimRef") or {}
        if ref.get("name"):
            self.claims.add((str(ref.get("namespace", "")), str(ref["name"])))
        if event_type == "DELETED":
            for claim in self.api.store.iterate(self.claims_kind.storage_key):
                if (claim.obj.get("spec") or {}).get("volumeName") == stored.name:
                    self.claims.add((claim.namespace, claim.name))

    def _on_class(self, event_type: str, stored: Stored) -> None:
        for claim in self.api.store.iterate(self.claims_kind.storage_key):
            if (claim.obj.get("spec") or {}).get("storageClassName") == stored.name:
                self.claims.add((claim.namespace, claim.name))

    async def _event(self, obj: Obj, event_type: str, reason: str, message: str) -> None:
        mark = (str(obj["metadata"].get("uid", "")), reason, message)
        if mark in self._recorded:
            return
        self._recorded.add(mark)
        await record_event(self.api, obj, event_type, reason, message, component=COMPONENT)

    # ---------------------------------------------------------------------------- claims
    async def _sync_claim(self, key: tuple[str, str]) -> None:
        claim = self._claim(*key)
        if claim is None:
            return
        volume_name = (claim.get("spec") or {}).get("volumeName")
        if volume_name:
            await self._sync_bound_claim(claim, str(volume_name))
        elif not claim["metadata"].get("deletionTimestamp"):
            await self._sync_unbound_claim(claim)

    async def _sync_bound_claim(self, claim: Obj, volume_name: str) -> None:
        volume = self._volume(volume_name)
        phase = (claim.get("status") or {}).get("phase")
        if volume is None:
            if phase == "Bound":
                await self._claim_status(claim, {"phase": "Lost"})
                await self._event(claim, "Warning", "ClaimLost", CLAIM_LOST_MESSAGE)
            return
        ref = (volume.get("spec") or {}).get("claimRef") or {}
        if not ref.get("name"):
            await self._bind(volume, claim)
        elif _refers_to(ref, claim):
            if phase != "Bound" or (volume.get("status") or {}).get("phase") != "Bound":
                await self._bind(volume, claim)
        elif phase == "Bound":
            await self._claim_status(claim, {"phase": "Lost"})
            await self._event(claim, "Warning", "ClaimMisbound",
                              "Two claims are bound to the same volume, this one is bound "
                              "incorrectly")
        else:
            await self._event(claim, "Warning", "FailedBinding",
                              f'volume "{volume_name}" already bound to a different claim.')

    async def _sync_unbound_claim(self, claim: Obj) -> None:
        # a volume pre-bound to this claim (a provisioner's) binds first
        for stored in self.api.store.iterate(self.volumes_kind.storage_key):
            ref = (stored.obj.get("spec") or {}).get("claimRef") or {}
            if _refers_to(ref, claim) and not stored.obj["metadata"].get("deletionTimestamp"):
                await self._bind(stored.obj, claim)
                return
        spec = claim.get("spec") or {}
        class_name = str(spec.get("storageClassName") or "")
        storage_class = self._class(class_name)
        if class_name and storage_class is None:
            await self._event(claim, "Warning", "ProvisioningFailed",
                              f'storageclass.storage.k8s.io "{class_name}" not found')
            return
        annotations = claim["metadata"].get("annotations") or {}
        node: Obj | None = None
        if (storage_class or {}).get("volumeBindingMode") == "WaitForFirstConsumer":
            selected = annotations.get(SELECTED_NODE)
            if not selected:
                await self._event(claim, "Normal", "WaitForFirstConsumer", WAITING_MESSAGE)
                return
            node = self._get(self.nodes_kind.storage_key, "", str(selected)) or {
                "metadata": {"name": selected}}
        for stored in self.api.store.iterate(self.volumes_kind.storage_key):
            if volume_matches_claim(stored.obj, claim, node):
                await self._bind(stored.obj, claim, by_controller=True)
                return
        provisioner = str((storage_class or {}).get("provisioner") or "")
        if not class_name:
            await self._event(claim, "Normal", "FailedBinding", NO_CLASS_MESSAGE)
        elif provisioner and provisioner != NO_PROVISIONER:
            if annotations.get(STORAGE_PROVISIONER) != provisioner:
                new = copy_json(claim)
                new["metadata"].setdefault("annotations", {}).update(
                    {STORAGE_PROVISIONER: provisioner, BETA_STORAGE_PROVISIONER: provisioner})
                await self.api.update(self.claims_kind, *claim_key(claim), new)
            await self._event(claim, "Normal", "ExternalProvisioning",
                              external_provisioning_message(provisioner))
        else:
            await self._event(claim, "Normal", "FailedBinding",
                              "no persistent volumes available for this claim and no storage "
                              "class is set" if not class_name else
                              "no persistent volumes available for this claim")

    # --------------------------------------------------------------------------- volumes
    async def _sync_volume(self, name: str) -> None:
        volume = self._volume(name)
        if volume is None:
            return
        spec = volume.get("spec") or {}
        ref = spec.get("claimRef") or {}
        phase = (volume.get("status") or {}).get("phase")
        if not ref.get("name"):
            if phase != "Available":
                await self._volume_status(volume, "Available")
            return
        claim = self._claim(str(ref.get("namespace", "")), str(ref["name"]))
        if claim is None or (ref.get("uid") and ref["uid"] != claim["metadata"].get("uid")):
            await self._release(volume)
            return
        bound_to = (claim.get("spec") or {}).get("volumeName")
        if not bound_to:
            return  # the claim's sync binds it
        if bound_to == name:
            if phase != "Bound":
                await self._volume_status(volume, "Bound")
            return
        # the claim went to another volume: a volume bound by the controller is freed
        if (volume["metadata"].get("annotations") or {}).get(BOUND_BY_CONTROLLER) == "yes":
            new = copy_json(volume)
            new["spec"].pop("claimRef", None)
            new["metadata"]["annotations"].pop(BOUND_BY_CONTROLLER, None)
            await self.api.update(self.volumes_kind, "", name, new)

    async def _release(self, volume: Obj) -> None:
        spec = volume.get("spec") or {}
        phase = (volume.get("status") or {}).get("phase")
        if phase not in ("Released", "Failed"):
            await self._volume_status(volume, "Released")
            volume = self._volume(volume["metadata"]["name"]) or volume
        policy = spec.get("persistentVolumeReclaimPolicy") or "Retain"
        annotations = volume["metadata"].get("annotations") or {}
        if policy == "Delete" and not annotations.get(PROVISIONED_BY) and phase != "Failed":
            message = (f'error getting deleter volume plugin for volume '
                       f'"{volume["metadata"]["name"]}": no deletable volume plugin matched')
            await self._volume_status(volume, "Failed", message)
            await self._event(volume, "Warning", "VolumeFailedDelete", message)
        # Retain keeps the volume Released; a provisioned volume is its provisioner's to delete

    # --------------------------------------------------------------------------- binding
    async def _bind(self, volume: Obj, claim: Obj, by_controller: bool = False) -> None:
        """bindVolumeToClaim, then the volume's status, the claim's volumeName, its status."""
        name = str(volume["metadata"]["name"])
        ref = (volume.get("spec") or {}).get("claimRef") or {}
        if not ref.get("uid"):
            new = copy_json(volume)
            new["spec"]["claimRef"] = {
                "kind": "PersistentVolumeClaim", "apiVersion": "v1",
                "namespace": claim["metadata"]["namespace"], "name": claim["metadata"]["name"],
                "uid": claim["metadata"]["uid"],
                "resourceVersion": claim["metadata"].get("resourceVersion", "")}
            if by_controller or not ref.get("name"):
                new["metadata"].setdefault("annotations", {})[BOUND_BY_CONTROLLER] = "yes"
            volume = (await self.api.update(self.volumes_kind, "", name, new))
        if (volume.get("status") or {}).get("phase") != "Bound":
            volume = await self._volume_status(volume, "Bound")
        spec = claim.get("spec") or {}
        annotations = claim["metadata"].get("annotations") or {}
        if spec.get("volumeName") != name or annotations.get(BIND_COMPLETED) != "yes":
            new = copy_json(claim)
            new["spec"]["volumeName"] = name
            marks = new["metadata"].setdefault("annotations", {})
            marks[BIND_COMPLETED] = "yes"
            if not spec.get("volumeName"):
                marks[BOUND_BY_CONTROLLER] = "yes"
            claim = await self.api.update(self.claims_kind, *claim_key(claim), new)
        if (claim.get("status") or {}).get("phase") != "Bound":
            volume_spec = volume.get("spec") or {}
            await self._claim_status(claim, {
                "phase": "Bound", "accessModes": list(volume_spec.get("accessModes") or []),
                "capacity": dict(volume_spec.get("capacity") or {})})

    async def _volume_status(self, volume: Obj, phase: str, message: str = "") -> Obj:
        new = copy_json(volume)
        new["status"] = {"phase": phase, **({"message": message} if message else {})}
        return await self.api.update(self.volumes_kind, "", volume["metadata"]["name"], new,
                                     subresource="status")

    async def _claim_status(self, claim: Obj, status: Obj) -> None:
        new = copy_json(claim)
        new["status"] = {**(claim.get("status") or {}), **status}
        await self.api.update(self.claims_kind, *claim_key(claim), new, subresource="status")

    async def run(self) -> None:
        await run_together(
            watch_forever(self.api, self.claims_kind, self._on_claim),
            watch_forever(self.api, self.volumes_kind, self._on_volume),
            watch_forever(self.api, self.classes_kind, self._on_class),
            self.claims.run(), self.volumes.run(),
        )


def _refers_to(ref: Obj, claim: Obj) -> bool:
    meta = claim["metadata"]
    return (ref.get("namespace"), ref.get("name")) == (meta.get("namespace"), meta["name"]) and (
        not ref.get("uid") or ref["uid"] == meta.get("uid"))


def pod_claim_names(pod: Obj) -> set[str]:
    """The claims a pod's volumes name (ephemeral volumes' claims are <pod>-<volume>)."""
    names: set[str] = set()
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        if not isinstance(volume, dict):
            continue
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if claim:
            names.add(str(claim))
        elif volume.get("ephemeral") is not None:
            names.add(f"{pod['metadata']['name']}-{volume.get('name')}")
    return names


class ProtectionController(Controller):
    """pvc-protection / pv-protection: the finalizer goes once the object is being deleted and
    no longer in use (a claim: no scheduled, unfinished pod mounts it; a volume: not Bound)."""

    def __init__(self, api: ApiServer, name: str) -> None:
        super().__init__(api)
        self.name = name
        self.claims = name == "pvc-protection"
        self.kind = kind_of(api, "", "v1",
                            "persistentvolumeclaims" if self.claims else "persistentvolumes")
        self.pods_kind = kind_of(api, "", "v1", "pods")
        self.finalizer = PVC_PROTECTION_FINALIZER if self.claims else PV_PROTECTION_FINALIZER
        self.queue = WorkQueue(self._sync, name)

    def _on_object(self, event_type: str, stored: Stored) -> None:
        if stored.obj["metadata"].get("deletionTimestamp") and event_type != "DELETED":
            self.queue.add((stored.namespace, stored.name))

    def _on_pod(self, event_type: str, stored: Stored) -> None:
        for claim in pod_claim_names(stored.obj):
            self.queue.add((stored.namespace, claim))

    def _in_use(self, obj: Obj) -> bool:
        if not self.claims:
            return (obj.get("status") or {}).get("phase") == "Bound"
        namespace, name = claim_key(obj)
        return any(
            (pod.obj.get("spec") or {}).get("nodeName")
            and (pod.obj.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            and name in pod_claim_names(pod.obj)
            for pod in self.api.store.list(self.pods_kind.storage_key, namespace))

    async def _sync(self, key: tuple[str, str]) -> None:
        stored = self.api.store.get(self.kind.storage_key, *key)
        if stored is None:
            return
        obj = stored.obj
        finalizers = obj["metadata"].get("finalizers") or []
        if not obj["metadata"].get("deletionTimestamp") or self.finalizer not in finalizers:
            return
        if self._in_use(obj):
            return
        new = copy_json(obj)
        new["metadata"]["finalizers"] = [f for f in finalizers if f != self.finalizer]
        try:
            await self.api.update(self.kind, *key, new)
        except StatusError as error:
            if error.code != 404:
                raise

    async def run(self) -> None:
        watches = [watch_forever(self.api, self.kind, self._on_object)]
        if self.claims:
            watches.append(watch_forever(self.api, self.pods_kind, self._on_pod))
        await run_together(*watches, self.queue.run())
