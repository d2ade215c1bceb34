"""StorageClasses, PersistentVolumes and claims: the API's rules, the PV controller, a dynamic
provisioner, the scheduler's volume binding and StatefulSets' claims, through the API (the
kubesim-only tests name kubesim's simulated provisioners; the others also run on real clusters,
where the default class is whatever the cluster installs)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.helpers import wait_for

CSI = "csi.kubesim.io"
SELECTED_NODE = "volume.kubernetes.io/selected-node"


def claim(name: str, size: str = "1Gi", storage_class: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": size}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {"metadata": {"name": name}, "spec": spec}


def pod_with_claim(name: str, claim_name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "app", "image": "busybox:1.36",
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]}}


def events_of(home: Any, namespace: str, name: str) -> dict[str, str]:
    return {e.reason: e.message for e in home.core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name}").items}


@pytest.fixture
def storage(home: Any) -> client.StorageV1Api:
    return client.StorageV1Api(home.api_client)


@pytest.fixture
def csi_class(storage: client.StorageV1Api) -> Iterator[str]:
    """An Immediate class of kubesim's simulated CSI driver, expandable, with 3Gi in all."""
    name = f"csi-{uuid.uuid4().hex[:8]}"
    storage.create_storage_class({
        "metadata": {"name": name}, "provisioner": CSI, "allowVolumeExpansion": True,
        "parameters": {"kubesim.io/capacity": "3Gi"}})
    yield name
    storage.delete_storage_class(name)


def phase(home: Any, namespace: str, name: str) -> str:
    return str(home.core.read_namespaced_persistent_volume_claim(name, namespace).status.phase)


def test_default_class_waits_for_the_first_consumer_then_binds_on_its_node(
        home: Any, namespace: str) -> None:
    home.core.create_namespaced_persistent_volume_claim(namespace, claim("data"))
    created = home.core.read_namespaced_persistent_volume_claim("data", namespace)
    assert created.spec.storage_class_name  # the default class was filled in
    assert "kubernetes.io/pvc-protection" in created.metadata.finalizers
    wait_for(lambda: "WaitForFirstConsumer" in events_of(home, namespace, "data"), timeout=30)
    assert phase(home, namespace, "data") == "Pending"
    home.core.create_namespaced_pod(namespace, pod_with_claim("app", "data"))
    bound = wait_for(lambda: (c := home.core.read_namespaced_persistent_volume_claim(
        "data", namespace)).status.phase == "Bound" and c, timeout=60)
    pod = wait_for(lambda: (p := home.core.read_namespaced_pod("app", namespace))
                   .spec.node_name and p, timeout=60)
    assert bound.metadata.annotations[SELECTED_NODE] == pod.spec.node_name
    assert bound.status.capacity["storage"] == "1Gi"
    volume = home.core.read_persistent_volume(bound.spec.volume_name)
    assert volume.status.phase == "Bound"
    assert volume.spec.claim_ref.uid == bound.metadata.uid
    assert "kubernetes.io/pv-protection" in volume.metadata.finalizers
    if volume.spec.node_affinity is not None:  # a node-local volume pins its node
        [term] = volume.spec.node_affinity.required.node_selector_terms
        assert term.match_expressions[0].values == [pod.spec.node_name]
    assert "ProvisioningSucceeded" in events_of(home, namespace, "data")


@pytest.mark.local_clusters(reason="kubesim's CSI driver (its expansion and capacity parameters), "
                                   "which envtest's stand-in workers run too")
def test_immediate_class_binds_at_once_and_deleting_the_claim_deletes_its_volume(
        home: Any, namespace: str, csi_class: str) -> None:
    home.core.create_namespaced_persistent_volume_claim(namespace, claim("data", "1Gi",
                                                                         csi_class))
    bound = wait_for(lambda: (c := home.core.read_namespaced_persistent_volume_claim(
        "data", namespace)).status.phase == "Bound" and c, timeout=30)
    assert bound.metadata.annotations["volume.kubernetes.io/storage-provisioner"] == CSI
    volume_name = bound.spec.volume_name
    assert home.core.read_persistent_volume(volume_name).spec.csi.driver == CSI
    home.core.delete_namespaced_persistent_volume_claim("data", namespace)

    def volume_gone() -> bool:
        try:
            home.core.read_persistent_volume(volume_name)
        except ApiException as error:
            return error.status == 404
        return False

    wait_for(volume_gone, timeout=30)


@pytest.mark.local_clusters(reason="kubesim's CSI driver (its expansion and capacity parameters), "
                                   "which envtest's stand-in workers run too")
def test_a_claim_in_use_stays_until_its_pod_is_gone(
        home: Any, namespace: str, csi_class: str) -> None:
    home.core.create_namespaced_persistent_volume_claim(namespace, claim("data", "1Gi",
                                                                         csi_class))
    home.core.create_namespaced_pod(namespace, pod_with_claim("app", "data"))
    wait_for(lambda: home.core.read_namespaced_pod("app", namespace).status.phase == "Running",
             timeout=60)
    home.core.delete_namespaced_persistent_volume_claim("data", namespace)
    held = home.core.read_namespaced_persistent_volume_claim("data", namespace)
    assert held.metadata.deletion_timestamp is not None
    assert held.status.phase == "Bound"
    home.core.delete_namespaced_pod("app", namespace)

    def claim_gone() -> bool:
        try:
            home.core.read_namespaced_persistent_volume_claim("data", namespace)
        except ApiException as error:
            return error.status == 404
        return False

    wait_for(claim_gone, timeout=60)


@pytest.mark.local_clusters(reason="kubesim's CSI driver (its expansion and capacity parameters), "
                                   "which envtest's stand-in workers run too")
def test_a_full_backend_fails_provisioning_with_an_event(
        home: Any, namespace: str, csi_class: str) -> None:
    home.core.create_namespaced_persistent_volume_claim(namespace, claim("big", "5Gi",
                                                                         csi_class))
    failed = wait_for(lambda: events_of(home, namespace, "big").get("ProvisioningFailed"),
                      timeout=30)
    assert f'StorageClass "{csi_class}"' in failed
    assert phase(home, namespace, "big") == "Pending"


@pytest.mark.local_clusters(reason="kubesim's CSI driver (its expansion and capacity parameters), "
                                   "which envtest's stand-in workers run too")
def test_expansion_only_where_the_class_allows_it(
        home: Any, namespace: str, csi_class: str) -> None:
    home.core.create_namespaced_persistent_volume_claim(namespace, claim("data", "1Gi",
                                                                         csi_class))
    wait_for(lambda: phase(home, namespace, "data") == "Bound", timeout=30)
    home.core.patch_namespaced_persistent_volume_claim("data", namespace, {
        "spec": {"resources": {"requests": {"storage": "2Gi"}}}})
    grown = wait_for(lambda: (c := home.core.read_namespaced_persistent_volume_claim(
        "data", namespace)).status.capacity["storage"] == "2Gi" and c, timeout=30)
    assert home.core.read_persistent_volume(grown.spec.volume_name).spec.capacity[
        "storage"] == "2Gi"
    assert not grown.status.conditions  # Resizing while it lasted
    assert {"Resizing", "VolumeResizeSuccessful"} <= set(events_of(home, namespace, "data"))
    with pytest.raises(ApiException) as shrink:
        home.core.patch_namespaced_persistent_volume_claim("data", namespace, {
            "spec": {"resources": {"requests": {"storage": "1Gi"}}}})
    assert shrink.value.status == 422
    with pytest.raises(ApiException) as change:
        home.core.patch_namespaced_persistent_volume_claim("data", namespace, {
            "spec": {"accessModes": ["ReadWriteMany"]}})
    assert change.value.status == 422
    assert "spec is immutable after creation" in change.value.body


@pytest.mark.kubesim_only(reason="kubesim's external-resizer keeps the claim's resize state in "
                                 "status.allocatedResources and allocatedResourceStatuses "
                                 "(RecoverVolumeExpansionFailure, on by default from 1.32), which "
                                 "kube-apiserver 1.31 drops with the gate off")
def test_a_file_system_grown_on_the_node_waits_for_a_running_pod(
        home: Any, namespace: str, storage: client.StorageV1Api) -> None:
    """A driver that grows the file system on the node (external-resizer, then the kubelet):
    FileSystemResizePending until a running pod mounts the claim."""
    name = f"csi-node-{uuid.uuid4().hex[:8]}"
    node_expanding: Any = {
        "metadata": {"name": name}, "provisioner": CSI, "allowVolumeExpansion": True,
        "parameters": {"kubesim.io/node-expansion": "true"}}
    storage.create_storage_class(node_expanding)
    try:
        home.core.create_namespaced_persistent_volume_claim(namespace, claim("data", "1Gi",
                                                                             name))
        wait_for(lambda: phase(home, namespace, "data") == "Bound", timeout=30)
        home.core.patch_namespaced_persistent_volume_claim("data", namespace, {
            "spec": {"resources": {"requests": {"storage": "2Gi"}}}})

        def resize_conditions() -> list[str]:
            found = home.core.read_namespaced_persistent_volume_claim("data", namespace)
            return [c.type for c in found.status.conditions or []]
        wait_for(lambda: resize_conditions() == ["FileSystemResizePending"], timeout=30,
                 message="the file system's resize pending on the node")
        pending = home.core.read_namespaced_persistent_volume_claim("data", namespace)
        assert pending.status.capacity["storage"] == "1Gi"
        assert pending.status.allocated_resources == {"storage": "2Gi"}
        assert pending.status.allocated_resource_statuses == {"storage": "NodeResizePending"}
        assert home.core.read_persistent_volume(pending.spec.volume_name).spec.capacity[
            "storage"] == "2Gi"
        assert {"Resizing", "FileSystemResizeRequired"} <= set(events_of(home, namespace,
                                                                         "data"))

        home.core.create_namespaced_pod(namespace, pod_with_claim("app", "data"))
        grown = wait_for(lambda: (c := home.core.read_namespaced_persistent_volume_claim(
            "data", namespace)).status.capacity["storage"] == "2Gi" and c, timeout=60,
            message="the file system grown once a pod runs")
        assert not grown.status.conditions
        assert grown.status.allocated_resource_statuses is None
        assert "FileSystemResizeSuccessful" in events_of(home, namespace, "data")
        assert "FileSystemResizeSuccessful" in events_of(home, namespace, "app")
    finally:
        storage.delete_storage_class(name)


def test_the_default_class_refuses_expansion(home: Any, namespace: str,
                                             storage: client.StorageV1Api) -> None:
    default = next((c for c in storage.list_storage_class().items if (
        c.metadata.annotations or {}).get("storageclass.kubernetes.io/is-default-class")
        == "true"), None)
    if default is None or default.allow_volume_expansion:
        pytest.skip("the cluster's default class allows expansion")
    home.core.create_namespaced_persistent_volume_claim(namespace, claim("data"))
    home.core.create_namespaced_pod(namespace, pod_with_claim("app", "data"))
    wait_for(lambda: phase(home, namespace, "data") == "Bound", timeout=60)
    with pytest.raises(ApiException) as refused:
        home.core.patch_namespaced_persistent_volume_claim("data", namespace, {
            "spec": {"resources": {"requests": {"storage": "2Gi"}}}})
    assert refused.value.status == 403
    assert "must support resize" in refused.value.body


def test_a_pod_whose_claim_is_missing_is_unschedulable(home: Any, namespace: str) -> None:
    home.core.create_namespaced_pod(namespace, pod_with_claim("app", "nothing"))
    condition = wait_for(lambda: next((c for c in home.core.read_namespaced_pod(
        "app", namespace).status.conditions or [] if c.type == "PodScheduled"), None),
        timeout=30)
    assert condition.reason == "Unschedulable"
    assert 'persistentvolumeclaim "nothing" not found' in condition.message
    home.core.create_namespaced_persistent_volume_claim(namespace, claim("nothing"))
    wait_for(lambda: home.core.read_namespaced_pod("app", namespace).spec.node_name, timeout=60)


def test_a_pod_follows_its_volumes_node_affinity(home: Any, namespace: str) -> None:
    nodes = [n.metadata.name for n in home.core.list_node().items
             if not n.spec.taints and not n.spec.unschedulable]
    target = sorted(nodes)[-1]
    pv_name = f"pinned-{uuid.uuid4().hex[:8]}"
    home.core.create_persistent_volume({
        "metadata": {"name": pv_name},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                 "hostPath": {"path": "/tmp/pinned"},
                 "claimRef": {"namespace": namespace, "name": "data"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "kubernetes.io/hostname", "operator": "In",
                      "values": [target]}]}]}}}})
    try:
        home.core.create_namespaced_persistent_volume_claim(namespace, claim("data", "1Gi", ""))
        wait_for(lambda: phase(home, namespace, "data") == "Bound", timeout=30)
        for index in range(3):
            home.core.create_namespaced_pod(namespace, pod_with_claim(f"app-{index}", "data"))
        for index in range(3):
            assert wait_for(lambda i=index: home.core.read_namespaced_pod(
                f"app-{i}", namespace).spec.node_name, timeout=60) == target
        home.core.delete_collection_namespaced_pod(namespace)
        home.core.delete_namespaced_persistent_volume_claim("data", namespace)
        # Retain: the volume outlives its claim, Released
        wait_for(lambda: home.core.read_persistent_volume(pv_name).status.phase == "Released",
                 timeout=60)
    finally:
        home.core.delete_persistent_volume(pv_name)


def test_storage_class_provisioner_is_immutable(storage: client.StorageV1Api) -> None:
    name = f"fixed-{uuid.uuid4().hex[:8]}"
    created = storage.create_storage_class({"metadata": {"name": name},
                                            "provisioner": "example.com/one"})
    try:
        assert created.reclaim_policy == "Delete"
        assert created.volume_binding_mode == "Immediate"
        with pytest.raises(ApiException) as refused:
            storage.patch_storage_class(name, {"provisioner": "example.com/two"})
        assert refused.value.status == 422
    finally:
        storage.delete_storage_class(name)


def test_stateful_set_pods_keep_their_claims(home: Any, namespace: str) -> None:
    apps = client.AppsV1Api(home.api_client)
    apps.create_namespaced_stateful_set(namespace, {
        "metadata": {"name": "db"},
        "spec": {"replicas": 2, "serviceName": "db",
                 "selector": {"matchLabels": {"app": "db"}},
                 "template": {"metadata": {"labels": {"app": "db"}}, "spec": {
                     "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "db", "image": "busybox:1.36",
                                     "command": ["sleep", "3600"],
                                     "volumeMounts": [{"name": "data", "mountPath": "/d"}]}]}},
                 "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                     "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}}]}})
    wait_for(lambda: apps.read_namespaced_stateful_set("db", namespace).status.ready_replicas
             == 2, timeout=120)
    claims = {c.metadata.name: c for c in home.core.list_namespaced_persistent_volume_claim(
        namespace).items}
    assert set(claims) == {"data-db-0", "data-db-1"}
    assert all(c.status.phase == "Bound" for c in claims.values())
    pod = home.core.read_namespaced_pod("db-1", namespace)
    assert pod.spec.hostname == "db-1" and pod.spec.subdomain == "db"
    assert [v.persistent_volume_claim.claim_name for v in pod.spec.volumes
            if v.persistent_volume_claim] == ["data-db-1"]
    old_uid = pod.metadata.uid
    home.core.delete_namespaced_pod("db-1", namespace)
    wait_for(lambda: (p := home.core.read_namespaced_pod("db-1", namespace)).metadata.uid
             != old_uid and p.status.phase == "Running", timeout=120)
    apps.patch_namespaced_stateful_set("db", namespace, {"spec": {"replicas": 1}})
    wait_for(lambda: [p.metadata.name for p in home.core.list_namespaced_pod(namespace).items]
             == ["db-0"], timeout=120)
    # the claims stay (retention policy Retain)
    assert {c.metadata.name for c in home.core.list_namespaced_persistent_volume_claim(
        namespace).items} == {"data-db-0", "data-db-1"}
