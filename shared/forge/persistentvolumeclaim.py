"""PersistentVolumeClaim, home → remote: the storage fabric's first half.

A home claim of the virtual storage class is the agent's to provision once the scheduler has
picked its virtual node for the claim's first consumer (`volume.kubernetes.io/selected-node`),
as any external provisioner's claims are its own once the PV controller names it
(`volume.kubernetes.io/storage-provisioner`). It is then reflected "verbatim" to the twin
namespace, with these changes:
- the storage class is the provider's: the one the claim's `REMOTE_STORAGE_CLASS_ANNOTATION`
  (Liqo's `liqo.io/remote-storage-class`, or annex's alias
  `offloading.liqo.io/remote-storage-class`) names, else the offer's default class, else the
  first offered one; when the offer names none, no class at all (the provider's default class
  takes it);
- what ties the claim to the home cluster's storage goes: `volumeName`, `selector` (it selects
  home volumes' labels), `dataSource`/`dataSourceRef` (home snapshots and claims), and the
  annotations Kubernetes' storage controllers write (binding, provisioner, selected node); the
  remote ones' on the remote copy stay (theirs: rewriting them would fight the remote
  controllers);
- only `resources.requests` ever changes afterwards (expansion), as the remote API server
  allows for a bound claim: the class chosen at creation stays (`current_class`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from shared.api.builtin import PERSISTENTVOLUMECLAIMS
from shared.api.resource_offer import ClassOffer
from shared.forge.json_copy import copied
from shared.forge.metadata import ReflectionConfig, remote_metadata
from shared.rfc3339 import rfc3339
from shared.wellknown import (
    PERSISTENT_VOLUME_CLAIMS,
    REAL_CLAIM_LABEL,
    REMOTE_STORAGE_CLASS_ALIAS_ANNOTATION,
    REMOTE_STORAGE_CLASS_ANNOTATION,
    REQUESTS_STORAGE,
    SELECTED_NODE_ANNOTATION,
    STORAGE_PROVISIONER_ANNOTATION,
)


def is_storage_controller_annotation(key: str) -> bool:
    return key.startswith(STORAGE_CONTROLLER_PREFIXES)

# Annotations Kubernetes' storage controllers and the scheduler write (binding, provisioner,
# selected node, resizer): on the home claim they are about home storage, never reflected; on
# the remote claim they are the remote controllers', kept as they are.
STORAGE_CONTROLLER_PREFIXES = ("pv.kubernetes.io/", "volume.kubernetes.io/",
                               "volume.beta.kubernetes.io/")
_REFLECTED_SPEC = ("accessModes", "resources", "volumeMode", "volumeAttributesClassName")
STORAGE_CLASS_ANNOTATIONS = (REMOTE_STORAGE_CLASS_ANNOTATION,
                             REMOTE_STORAGE_CLASS_ALIAS_ANNOTATION)
"""The names a claim asks for a provider's class by, the first set one winning: requests of
the home side, not reflected."""


def storage_class_of(claim: Mapping[str, Any]) -> str:
    return str((claim.get("spec") or {}).get("storageClassName") or "")


def requested_storage(claim: Mapping[str, Any]) -> str | None:
    requests = ((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}
    value = requests.get("storage")
    return None if value is None else str(value)


def awaits_virtual_volume(claim: Mapping[str, Any], provisioner: str, node_name: str) -> bool:
    """True for a home claim whose volume this virtual node is to provide: handed to the
    virtual provisioner, its first consumer scheduled on `node_name`, not bound, not going."""
    meta = claim.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    return (annotations.get(STORAGE_PROVISIONER_ANNOTATION) == provisioner
            and annotations.get(SELECTED_NODE_ANNOTATION) == node_name
            and not (claim.get("spec") or {}).get("volumeName")
            and not meta.get("deletionTimestamp"))


def remote_storage_class(claim: Mapping[str, Any], offered: Sequence[ClassOffer]) -> str | None:
    """The provider's class for the claim: the one it asks for by annotation (Liqo's name,
    else annex's alias), else the offer's default, else the first offered; None (the provider's
    own default) when none is offered. A class the offer does not list is the provider's
    admission to refuse."""
    annotations = (claim.get("metadata") or {}).get("annotations") or {}
    wanted = next((annotations[key] for key in STORAGE_CLASS_ANNOTATIONS if annotations.get(key)),
                  None)
    if wanted:
        return str(wanted)
    default = next((c.name for c in offered if c.default), None)
    if default is not None:
        return default
    return offered[0].name if offered else None


def remote_claim(
    local: Mapping[str, Any],
    remote_namespace: str,
    config: ReflectionConfig,
    storage_class: str | None,
    current: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The desired remote copy of the home claim `local`, of the provider's `storage_class`
    (None: the provider's default class); what the remote storage controllers wrote on the
    `current` copy stays."""
    spec = local.get("spec") or {}
    remote_spec: dict[str, Any] = {key: copied(spec[key]) for key in _REFLECTED_SPEC
                                   if spec.get(key) is not None}
    if storage_class is not None:
        remote_spec["storageClassName"] = storage_class
    metadata = remote_metadata(local, remote_namespace, config,
                               skipped_annotations=STORAGE_CLASS_ANNOTATIONS)
    annotations = {key: value for key, value in (metadata.pop("annotations", None) or {}).items()
                   if not is_storage_controller_annotation(key)}
    annotations.update({key: value for key, value in (
        (current or {}).get("metadata") or {}).get("annotations", {}).items()
        if is_storage_controller_annotation(key)})
    if annotations:
        metadata["annotations"] = annotations
    return {**PERSISTENTVOLUMECLAIMS.type_meta(), "metadata": metadata,
            "spec": remote_spec}


def current_class(remote: Mapping[str, Any] | None) -> str | None:
    """The class an existing remote claim was created with (a claim's class never changes)."""
    if remote is None:
        return None
    return storage_class_of(remote) or None


def is_bound(claim: Mapping[str, Any]) -> bool:
    return ((claim.get("status") or {}).get("phase") == "Bound"
            and bool((claim.get("spec") or {}).get("volumeName")))


def capacity_of(claim: Mapping[str, Any]) -> str | None:
    value = ((claim.get("status") or {}).get("capacity") or {}).get("storage")
    return None if value is None else str(value)


def claim_usage(claim: Mapping[str, Any]) -> dict[str, str]:
    """What a claim counts against a Quota: its requested storage and one claim (ResourceQuota's
    `requests.storage` and `persistentvolumeclaims`)."""
    usage = {PERSISTENT_VOLUME_CLAIMS: "1"}
    size = requested_storage(claim)
    if size is not None:
        usage[REQUESTS_STORAGE] = size
    return usage


def real_claim_name(claim: Mapping[str, Any]) -> str:
    return f"real-{(claim.get('metadata') or {}).get('uid', '')}"


def real_claim(claim: Mapping[str, Any], storage_class: str, node_name: str) -> dict[str, Any]:
    """For a claim of the virtual class whose first consumer runs on the physical home node
    `node_name`: the claim of the real home `storage_class` that gets the volume (as Liqo's
    storage provisioner does), beside it, owned by it (it goes with it), already placed on that
    node for a WaitForFirstConsumer class."""
    meta, spec = claim.get("metadata") or {}, claim.get("spec") or {}
    return {
        **PERSISTENTVOLUMECLAIMS.type_meta(),
        "metadata": {
            "name": real_claim_name(claim), "namespace": meta.get("namespace", ""),
            "labels": {REAL_CLAIM_LABEL: meta.get("name", "")},
            "annotations": {SELECTED_NODE_ANNOTATION: node_name},
            "ownerReferences": [{**PERSISTENTVOLUMECLAIMS.type_meta(),
                                 "name": meta.get("name", ""), "uid": meta.get("uid", ""),
                                 "controller": True, "blockOwnerDeletion": True}]},
        "spec": {**{key: copied(spec[key]) for key in _REFLECTED_SPEC
                    if spec.get(key) is not None}, "storageClassName": storage_class},
    }


def real_claim_of(claim: Mapping[str, Any]) -> str | None:
    """The virtual claim a real claim serves (its label), None for any other claim."""
    value = ((claim.get("metadata") or {}).get("labels") or {}).get(REAL_CLAIM_LABEL)
    return None if value is None else str(value)


RESIZE_CONDITION_TYPES = ("Resizing", "FileSystemResizePending", "ControllerResizeError",
                          "NodeResizeError")
"""The claim conditions a volume's resizers own (external-resizer: Resizing, then
FileSystemResizePending when the node must grow the file system, ControllerResizeError on a
failed expansion; the kubelet: NodeResizeError); any other condition is somebody else's."""
REFUSED_RESIZE_CONDITION = "ControllerResizeError"
REMOTE_BOUND_CONDITION = "RemoteClaimBound"
"""The home claim's view of its remote twin: True once the remote claim is bound, else False
with the remote phase as the reason (the home claim is Bound as soon as its volume exists,
while the remote one may wait for its first consumer or a provisioner)."""


def home_claim_status(home: Mapping[str, Any], remote: Mapping[str, Any], refusal: str | None,
                      now: datetime) -> dict[str, Any] | None:
    """The status fields the virtual class's provisioner and resizer write on the bound `home`
    claim, as an external-resizer does on its claims (a merge patch of the status), or None when
    it shows them already:
    - `capacity`: the `remote` claim's, once it is bound and has grown (the home volume's is
      written first: `shared.forge.persistentvolume.expanded_capacity`);
    - the resize conditions (`RESIZE_CONDITION_TYPES`) the remote claim has, as it has them
      (Resizing while the provider's resizer works, FileSystemResizePending until its kubelet
      grows the file system...), gone when they go there;
    - ControllerResizeError with the provider's `refusal` of the expansion (its quota...), kept
      (with its lastTransitionTime) while the refusal lasts;
    - RemoteClaimBound: whether the remote claim is bound yet, its phase the reason.
    Every other status field is the PV controller's (phase, accessModes, the capacity written
    at binding: nothing is written before the claim is bound) and other conditions stay."""
    status = home.get("status") or {}
    if status.get("phase") != "Bound":
        return None
    current = [dict(c) for c in status.get("conditions") or []]
    resizing = {str(c.get("type")): copied(dict(c))
                for c in (remote.get("status") or {}).get("conditions") or []
                if c.get("type") in RESIZE_CONDITION_TYPES}
    if refusal is not None:
        previous = next((c for c in current if c.get("type") == REFUSED_RESIZE_CONDITION
                         and c.get("status") == "True"), None)
        resizing[REFUSED_RESIZE_CONDITION] = {
            "type": REFUSED_RESIZE_CONDITION, "status": "True", "message": refusal,
            "lastTransitionTime": (previous or {}).get("lastTransitionTime") or rfc3339(now)}
    ours = (*RESIZE_CONDITION_TYPES, REMOTE_BOUND_CONDITION)
    conditions = [c for c in current if c.get("type") not in ours] + [
        resizing[kind] for kind in RESIZE_CONDITION_TYPES if kind in resizing] + [
        _remote_bound(remote, current, now)]
    patch: dict[str, Any] = {}
    if conditions != current:
        patch["conditions"] = conditions
    grown = capacity_of(remote) if is_bound(remote) else None
    if grown is not None and grown != capacity_of(home):
        patch["capacity"] = {"storage": grown}
    return patch or None


def _remote_bound(remote: Mapping[str, Any], current: Sequence[Mapping[str, Any]],
                  now: datetime) -> dict[str, Any]:
    phase = str((remote.get("status") or {}).get("phase") or "Pending")
    meta = remote.get("metadata") or {}
    status = "True" if phase == "Bound" else "False"
    previous = next((c for c in current if c.get("type") == REMOTE_BOUND_CONDITION), {})
    return {"type": REMOTE_BOUND_CONDITION, "status": status, "reason": phase,
            "message": f"remote claim {meta.get('namespace')}/{meta.get('name')} is {phase}",
            "lastTransitionTime": previous.get("lastTransitionTime")
            if previous.get("status") == status else rfc3339(now)}
