"""shared.forge.persistentvolume: the home volume standing for a remote one, pinned to the
virtual node and pre-bound to the home claim, read from the bound remote claim."""

from __future__ import annotations

from typing import Any

from shared.forge.persistentvolume import (
    expanded_capacity,
    home_data_problem,
    home_volume,
    is_local_volume,
    is_virtual_volume,
    local_volume,
    pinned_node,
    unbound_claims,
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
    assert spec["csi"]["volumeHandle"] == "remote-id/shop-home/data-db-0"
    assert volume["metadata"]["annotations"][REMOTE_VOLUME_ANNOTATION] == \
        "remote-id/shop-home/data-db-0"
    assert is_virtual_volume(volume, VIRTUAL_STORAGE_PROVISIONER)
    assert not is_virtual_volume(REMOTE_VOLUME, VIRTUAL_STORAGE_PROVISIONER)
    assert "hostPath" not in spec


def test_a_pending_remote_claim_stands_for_what_it_requests() -> None:
    pending = {**REMOTE_CLAIM, "status": {"phase": "Pending"}}
    volume = home_volume(pending, HOME_CLAIM, "liqo-remote", "remote-id",
                         VIRTUAL_STORAGE_PROVISIONER)
    assert volume["spec"]["capacity"] == {"storage": "1Gi"}
    assert volume["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert expanded_capacity(volume, pending) is None


def test_a_remote_expansion_shows_at_home() -> None:
    volume = home_volume(REMOTE_CLAIM, HOME_CLAIM, "liqo-remote", "remote-id",
                         VIRTUAL_STORAGE_PROVISIONER)
    assert expanded_capacity(volume, REMOTE_CLAIM) is None
    grown = {**REMOTE_CLAIM, "status": {**REMOTE_CLAIM["status"], "capacity": {"storage": "5Gi"}}}
    assert expanded_capacity(volume, grown) == "5Gi"


def test_pinned_node_reads_only_a_single_hostname() -> None:
    assert pinned_node(REMOTE_VOLUME) == "remote-worker"
    assert pinned_node({"spec": {}}) is None


def test_a_pod_mounting_a_home_volume_is_held_back() -> None:
    ours = home_volume(REMOTE_CLAIM, HOME_CLAIM, "liqo-remote", "remote-id",
                       VIRTUAL_STORAGE_PROVISIONER)
    claims = {"data-db-0": {"spec": {"volumeName": "pvc-u-1"}},
              "cache": {"spec": {"volumeName": "local-7"}},
              "fresh": {"spec": {}}}
    volumes = {"pvc-u-1": ours}

    def pod(*names: str) -> dict[str, Any]:
        return {"metadata": {"name": "db-0"}, "spec": {"volumes": [
            {"name": n, "persistentVolumeClaim": {"claimName": n}} for n in names]}}

    def problem(mounted: dict[str, Any], node: str = "liqo-remote") -> str | None:
        return home_data_problem(mounted, claims.get, volumes.get,
                                 VIRTUAL_STORAGE_PROVISIONER, node)

    assert problem(pod("data-db-0", "fresh")) is None
    held = problem(pod("data-db-0", "cache"))
    assert held is not None and '"cache"' in held and '"local-7"' in held
    assert problem(pod("data-db-0"), node="liqo-other") is not None  # another node's volume
    # a claim not (yet) known bound is not judged: the cache is behind the scheduler
    assert unbound_claims(pod("data-db-0", "fresh", "unknown"), claims.get) == [
        "fresh", "unknown"]


def test_a_local_volume_copies_the_real_one_for_the_virtual_claim() -> None:
    real = {"metadata": {"name": "pvc-real"}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
        "hostPath": {"path": "/var/x"}, "storageClassName": "standard",
        "persistentVolumeReclaimPolicy": "Delete", "claimRef": {"name": "real-u-1"},
        "nodeAffinity": REMOTE_VOLUME["spec"]["nodeAffinity"]}}
    volume = local_volume(real, HOME_CLAIM, VIRTUAL_STORAGE_PROVISIONER)
    assert volume["metadata"]["name"] == "pvc-u-1"
    assert is_local_volume(volume) and is_virtual_volume(volume, VIRTUAL_STORAGE_PROVISIONER)
    assert volume["spec"]["hostPath"] == {"path": "/var/x"}
    assert volume["spec"]["storageClassName"] == "liqo"
    assert volume["spec"]["claimRef"]["uid"] == "u-1"
    assert pinned_node(volume) == "remote-worker"
