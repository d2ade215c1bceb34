"""PersistentVolume, remote → home: the storage fabric's second half (seed 004, "Persistent
storage").

Once the remote claim is bound, the virtual node's agent provisions the home claim as an
external provisioner does: a volume named `pvc-<home claim uid>`, pre-bound to the claim
(claimRef with its uid), which the home PV controller then binds. It stands for the remote
volume, read through the remote claim (the consumer identity may read its claims, not the
provider's cluster-scoped volumes):
- capacity and access modes are the remote claim's status (the remote volume's), the volume
  mode its spec's;
- a required node affinity pins it to the virtual node (`kubernetes.io/hostname`), so every
  later pod mounting the claim is scheduled there and offloaded to the same cluster;
- its source is a CSI volume of annex's virtual driver naming the remote volume: no kubelet ever
  mounts it (its pods run remotely), but a volume must name a source;
- reclaim policy Delete, as the virtual class says: the home claim's deletion releases it, the
  agent deletes it and the remote claim (the remote reclaim policy decides the data);
- `pv.kubernetes.io/provisioned-by` names the virtual provisioner, and
  `REMOTE_VOLUME_ANNOTATION` the remote volume ("<remote cluster id>/<volume>").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.forge.common import copied
from shared.wellknown import (
    HOSTNAME_LABEL,
    PROVISIONED_BY_ANNOTATION,
    REMOTE_VOLUME_ANNOTATION,
    VIRTUAL_STORAGE_DRIVER,
)


def home_volume_name(home_claim: Mapping[str, Any]) -> str:
    return f"pvc-{(home_claim.get('metadata') or {}).get('uid', '')}"


def remote_volume_reference(remote_cluster_id: str, remote_volume_name: str) -> str:
    return f"{remote_cluster_id}/{remote_volume_name}"


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
    reference = remote_volume_reference(remote_cluster_id,
                                        str(remote_spec.get("volumeName") or ""))
    spec: dict[str, Any] = {
        "capacity": {"storage": str((remote_status.get("capacity") or {}).get("storage", "0"))},
        "accessModes": copied(list(remote_status.get("accessModes") or
                                   claim_spec.get("accessModes") or [])),
        "volumeMode": remote_spec.get("volumeMode") or "Filesystem",
        "persistentVolumeReclaimPolicy": "Delete",
        "storageClassName": claim_spec.get("storageClassName") or "",
        "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
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
