"""PersistentVolume, remote → home: the storage fabric's second half.

Once the remote claim is bound, the virtual node's agent provisions the home claim as an
external provisioner does: a volume named `pvc-<home claim uid>`, pre-bound to the claim
(claimRef with its uid), which the home PV controller then binds. It stands for the remote
volume, read through the remote claim (the consumer identity may read its claims, not the
provider's cluster-scoped volumes):
- capacity and access modes are the remote claim's status (the remote volume's), the volume
  mode its spec's; a remote claim still Pending (a WaitForFirstConsumer class waits for the
  offloaded pod, which waits for this volume) stands for what it requests, until it binds;
- a required node affinity pins it to the virtual node (`kubernetes.io/hostname`), so every
  later pod mounting the claim is scheduled there and offloaded to the same cluster;
- its source is a CSI volume of annex's virtual driver naming the remote claim (its volume may
  not exist yet): no kubelet ever mounts it (its pods run remotely), but a volume must name a
  source;
- reclaim policy Delete, as the virtual class says: the home claim's deletion releases it, the
  agent deletes it and the remote claim (the remote reclaim policy decides the data);
- `pv.kubernetes.io/provisioned-by` names the virtual provisioner, and
  `REMOTE_VOLUME_ANNOTATION` the remote claim ("<remote cluster id>/<namespace>/<name>").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from shared.api.builtin import PERSISTENTVOLUMECLAIMS, PERSISTENTVOLUMES
from shared.forge.json_copy import copied
from shared.wellknown import (
    HOSTNAME_LABEL,
    PROVISIONED_BY_ANNOTATION,
    REAL_VOLUME_ANNOTATION,
    REMOTE_VOLUME_ANNOTATION,
    VIRTUAL_STORAGE_DRIVER,
)


def home_volume_name(home_claim: Mapping[str, Any]) -> str:
    return f"pvc-{(home_claim.get('metadata') or {}).get('uid', '')}"


def remote_volume_reference(remote_cluster_id: str, remote_claim: str) -> str:
    return f"{remote_cluster_id}/{remote_claim}"


def virtual_node_affinity(node_name: str) -> dict[str, Any]:
    """A volume's required node affinity to one node, by hostname."""
    return {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": HOSTNAME_LABEL, "operator": "In", "values": [node_name]}]}]}}


def home_volume(
    remote_claim: Mapping[str, Any],
    home_claim: Mapping[str, Any],
    node_name: str,
    remote_cluster_id: str,
    provisioner: str,
) -> dict[str, Any]:
    """The home volume standing for the volume the bound `remote_claim` holds, pre-bound to
    `home_claim`, pinned to the virtual node `node_name`."""
    remote_spec = remote_claim.get("spec") or {}
    remote_status = remote_claim.get("status") or {}
    claim_meta = home_claim.get("metadata") or {}
    claim_spec = home_claim.get("spec") or {}
    remote_meta = remote_claim.get("metadata") or {}
    reference = remote_volume_reference(
        remote_cluster_id, f"{remote_meta.get('namespace', '')}/{remote_meta.get('name', '')}")
    requested = ((remote_spec.get("resources") or {}).get("requests") or {}).get("storage", "0")
    spec: dict[str, Any] = {
        "capacity": {"storage": str((remote_status.get("capacity") or {}).get(
            "storage", requested))},
        "accessModes": copied(list(remote_status.get("accessModes") or
                                   claim_spec.get("accessModes") or [])),
        "volumeMode": remote_spec.get("volumeMode") or "Filesystem",
        "persistentVolumeReclaimPolicy": "Delete",
        "storageClassName": claim_spec.get("storageClassName") or "",
        "claimRef": {**PERSISTENTVOLUMECLAIMS.type_meta(),
                     "namespace": claim_meta.get("namespace", ""),
                     "name": claim_meta.get("name", ""), "uid": claim_meta.get("uid", "")},
        "nodeAffinity": virtual_node_affinity(node_name),
        "csi": {"driver": VIRTUAL_STORAGE_DRIVER, "volumeHandle": reference},
    }
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": home_volume_name(home_claim),
                     "annotations": {PROVISIONED_BY_ANNOTATION: provisioner,
                                     REMOTE_VOLUME_ANNOTATION: reference}},
        "spec": spec,
    }


def is_virtual_volume(volume: Mapping[str, Any], provisioner: str) -> bool:
    annotations = (volume.get("metadata") or {}).get("annotations") or {}
    return annotations.get(PROVISIONED_BY_ANNOTATION) == provisioner


def pinned_node(volume: Mapping[str, Any]) -> str | None:
    """The one node a volume's required affinity names by hostname, if it names exactly one."""
    required = ((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
    terms = required.get("nodeSelectorTerms") or []
    if len(terms) != 1:
        return None
    expressions = terms[0].get("matchExpressions") or []
    if len(expressions) != 1:
        return None
    expression = expressions[0]
    values = expression.get("values") or []
    if expression.get("key") == HOSTNAME_LABEL and expression.get("operator") == "In" and len(
            values) == 1:
        return str(values[0])
    return None


def expanded_capacity(home_volume_obj: Mapping[str, Any],
                      remote_claim: Mapping[str, Any]) -> str | None:
    """The remote claim's capacity when it differs from the home volume's (an expansion done
    remotely, to show at home); None when they agree."""
    remote = ((remote_claim.get("status") or {}).get("capacity") or {}).get("storage")
    home = ((home_volume_obj.get("spec") or {}).get("capacity") or {}).get("storage")
    return None if remote is None or str(remote) == str(home) else str(remote)


def pod_claim_names(pod: Mapping[str, Any]) -> list[str]:
    """The claims a pod mounts: its persistentVolumeClaim volumes', and its generic ephemeral
    volumes' (named `<pod>-<volume>` by the ephemeral volume controller)."""
    pod_name = (pod.get("metadata") or {}).get("name", "")
    names: list[str] = []
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if claim:
            names.append(str(claim))
        elif volume.get("ephemeral") is not None:
            names.append(f"{pod_name}-{volume.get('name', '')}")
    return names


def unbound_claims(pod: Mapping[str, Any],
                   claim: Callable[[str], Mapping[str, Any] | None]) -> list[str]:
    """The claims a pod mounts that are not (yet) known bound. The scheduler binds a pod only
    once its claims are bound: for a bound pod, these are a cache behind the API server."""
    return [name for name in pod_claim_names(pod)
            if not (((claim(name) or {}).get("spec") or {}).get("volumeName"))]


def home_data_problem(
    pod: Mapping[str, Any],
    claim: Callable[[str], Mapping[str, Any] | None],
    volume: Callable[[str], Mapping[str, Any] | None],
    provisioner: str,
    node_name: str,
) -> str | None:
    """Why a pod bound to the virtual node `node_name` cannot be offloaded for its volumes: it
    mounts a claim bound to a volume that is not one of this virtual node's (its data is on
    the home cluster). None when every bound claim is the virtual node's (unbound ones are not
    judged: `unbound_claims`)."""
    for name in pod_claim_names(pod):
        found = claim(name)
        volume_name = str(((found or {}).get("spec") or {}).get("volumeName") or "")
        if not volume_name:
            continue
        bound = volume(volume_name)
        if bound is not None and is_virtual_volume(bound, provisioner) and (
                pinned_node(bound) == node_name):
            continue
        return (f'persistentvolumeclaim "{name}" is bound to the home volume "{volume_name}": '
                f"its data stays on the home cluster, so a pod mounting it is not offloaded "
                f"(claims of the virtual storage class get their volume in the remote cluster)")
    return None


def local_volume(real_volume: Mapping[str, Any], home_claim: Mapping[str, Any],
                 provisioner: str) -> dict[str, Any]:
    """The volume of a claim of the virtual class provisioned by a real home class: the real
    volume's source, capacity, modes and node affinity (the data is there), pre-bound to the
    virtual claim; the real claim's reclaim policy decides the data, so this one only goes."""
    real_meta = real_volume.get("metadata") or {}
    spec = {key: copied(value) for key, value in (real_volume.get("spec") or {}).items()
            if key not in ("claimRef", "storageClassName", "persistentVolumeReclaimPolicy")}
    claim_meta = home_claim.get("metadata") or {}
    spec.update({
        "persistentVolumeReclaimPolicy": "Delete",
        "storageClassName": (home_claim.get("spec") or {}).get("storageClassName") or "",
        "claimRef": {**PERSISTENTVOLUMECLAIMS.type_meta(),
                     "namespace": claim_meta.get("namespace", ""),
                     "name": claim_meta.get("name", ""), "uid": claim_meta.get("uid", "")}})
    return {**PERSISTENTVOLUMES.type_meta(),
            "metadata": {"name": home_volume_name(home_claim),
                         "annotations": {PROVISIONED_BY_ANNOTATION: provisioner,
                                         REAL_VOLUME_ANNOTATION: str(real_meta.get("name", ""))}},
            "spec": spec}


def is_local_volume(volume: Mapping[str, Any]) -> bool:
    return REAL_VOLUME_ANNOTATION in ((volume.get("metadata") or {}).get("annotations") or {})
