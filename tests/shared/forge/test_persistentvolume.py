"""shared.forge.persistentvolume: the home volume standing for a remote one, pinned to the
virtual node and pre-bound to the home claim, read from the bound remote claim."""

from __future__ import annotations

from shared.forge.persistentvolume import (
    expanded_capacity,
    home_volume,
    is_virtual_volume,
    pinned_node,
)
from shared.wellknown import REMOTE_VOLUME_ANNOTATION, VIRTUAL_STORAGE_PROVISIONER

REMOTE_CLAIM = {
    "apiVersion": "v1", "kind": "PersistentVolumeClaim",
    "metadata": {"name": "data-db-0", "namespace": "shop-home", "uid": "r-9"},
    "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard",
             "volumeMode": "Block", "volumeName": "pvc-remote-9",
             "resources": {"requests": {"storage": "1Gi"}}},
    "status": {"phase": "Bound", "capacity": {"storage": "2Gi"},
               "accessModes": ["ReadWriteOnce"]},
}
REMOTE_VOLUME = {
    "metadata": {"name": "pvc-remote-9"},
    "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["remote-worker"]}]}]}}},
}
HOME_CLAIM = {
    "apiVersion": "v1", "kind": "PersistentVolumeClaim",
    "metadata": {"name": "data-db-0", "namespace": "shop", "uid": "u-1"},
    "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "liqo",
             "resources": {"requests": {"storage": "1Gi"}}},
}


def test_the_home_volume_follows_the_remote_one_and_pins_the_virtual_node() -> None:
    volume = home_volume(REMOTE_CLAIM, HOME_CLAIM, "liqo-remote", "remote-id",
                         VIRTUAL_STORAGE_PROVISIONER)
    spec = volume["spec"]
    assert volume["metadata"]["name"] == "pvc-u-1"
    assert spec["capacity"] == {"storage": "2Gi"}
    assert spec["accessModes"] == ["ReadWriteOnce"]
    assert spec["volumeMode"] == "Block"
    assert spec["storageClassName"] == "liqo"
    assert spec["persistentVolumeReclaimPolicy"] == "Delete"
    assert spec["claimRef"] == {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                "namespace": "shop", "name": "data-db-0", "uid": "u-1"}
    assert pinned_node(volume) == "liqo-remote"
    assert spec["csi"]["volumeHandle"] == "remote-id/pvc-remote-9"
    assert volume["metadata"]["annotations"][REMOTE_VOLUME_ANNOTATION] == \
        "remote-id/pvc-remote-9"
    assert is_virtual_volume(volume, VIRTUAL_STORAGE_PROVISIONER)
    assert not is_virtual_volume(REMOTE_VOLUME, VIRTUAL_STORAGE_PROVISIONER)
    assert "hostPath" not in spec


def test_a_remote_expansion_shows_at_home() -> None:
    volume = home_volume(REMOTE_CLAIM, HOME_CLAIM, "liqo-remote", "remote-id",
                         VIRTUAL_STORAGE_PROVISIONER)
    assert expanded_capacity(volume, REMOTE_CLAIM) is None
    grown = {**REMOTE_CLAIM, "status": {**REMOTE_CLAIM["status"], "capacity": {"storage": "5Gi"}}}
    assert expanded_capacity(volume, grown) == "5Gi"


def test_pinned_node_reads_only_a_single_hostname() -> None:
    assert pinned_node(REMOTE_VOLUME) == "remote-worker"
    assert pinned_node({"spec": {}}) is None
