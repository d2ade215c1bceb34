"""kube-scheduler's VolumeBinding plugin as pure functions over the pod, its claims, their
volumes and classes (pkg/scheduler/framework/plugins/volumebinding), with its messages.

PreFilter: every claim must exist and not be terminating; an unbound claim of an Immediate class
makes the pod wait. Filter: a bound claim's volume must accept the node (its required node
affinity); an unbound WaitForFirstConsumer claim needs a matching Available volume on the node
or a class that provisions. PreBind (in the scheduler): the unbound claims get the chosen node
in `volume.kubernetes.io/selected-node` and the pod is bound once they all are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kubesim.controllers.persistentvolume import (
    NO_PROVISIONER,
    SELECTED_NODE,
    pod_claim_names,
    volume_fits_node,
    volume_matches_claim,
)

Obj = dict[str, Any]
REASON_VOLUME_AFFINITY = "node(s) had volume node affinity conflict"
REASON_NO_VOLUMES_TO_BIND = "node(s) didn't find available persistent volumes to bind"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"


@dataclass
class PodVolumes:
    """A pod's claims split as the plugin's PreFilter splits them."""

    bound: list[Obj] = field(default_factory=list)  # their volumes
    to_bind: list[Obj] = field(default_factory=list)  # unbound WaitForFirstConsumer claims
    classes: dict[str, Obj] = field(default_factory=dict)


def pre_filter(pod: Obj, claim: Callable[[str], Obj | None],
               volume: Callable[[str], Obj | None],
               storage_class: Callable[[str], Obj | None]) -> tuple[PodVolumes | None, str]:
    """(the pod's volumes, "") or (None, why no node can take the pod now)."""
    found = PodVolumes()
    for name in sorted(pod_claim_names(pod)):
        obj = claim(name)
        if obj is None:
            return None, f'persistentvolumeclaim "{name}" not found'
        if obj["metadata"].get("deletionTimestamp"):
            return None, f'persistentvolumeclaim "{name}" is being deleted'
        volume_name = (obj.get("spec") or {}).get("volumeName")
        if volume_name:
            bound = volume(str(volume_name))
            if bound is None:
                return None, f'pvc {name} bound to non-existent pv {volume_name}'
            found.bound.append(bound)
            continue
        class_name = str((obj.get("spec") or {}).get("storageClassName") or "")
        sc = storage_class(class_name) if class_name else None
        if (sc or {}).get("volumeBindingMode") != "WaitForFirstConsumer":
            return None, UNBOUND_IMMEDIATE
        found.to_bind.append(obj)
        found.classes[class_name] = sc or {}
    return found, ""


def filter_volumes(volumes: PodVolumes, node: Obj, available: Iterable[Obj]) -> str | None:
    """None when the node suits the pod's volumes, else the reason."""
    if any(not volume_fits_node(v, node) for v in volumes.bound):
        return REASON_VOLUME_AFFINITY
    pool = list(available)
    for claim in volumes.to_bind:
        if any(volume_matches_claim(v, claim, node) for v in pool):
            continue
        sc = volumes.classes.get(str((claim.get("spec") or {}).get("storageClassName") or ""))
        provisioner = (sc or {}).get("provisioner")
        if not provisioner or provisioner == NO_PROVISIONER:
            return REASON_NO_VOLUMES_TO_BIND
    return None


def selected_elsewhere(claim: Obj, node: str) -> bool:
    """A claim the scheduler annotated for `node` and someone since unannotated or moved (a
    provisioner giving up sends the pod back to scheduling)."""
    return (claim["metadata"].get("annotations") or {}).get(SELECTED_NODE) != node
