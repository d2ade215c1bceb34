"""End to end: the storage fabric ("Persistent storage"). A StatefulSet with
volumeClaimTemplates of the virtual storage class in an offloaded namespace: its claims get
their volumes in the remote cluster and home volumes pinned to the virtual node; a deleted pod
comes back to the same volume; scaling down and deleting the claims cleans both sides. Refusals:
storage over the consumer's quota, a class the provider does not offer, a claim already bound
to a home volume.

The same tests run on real clusters: the virtual storage class is the home-agent chart's, the
offered class the remote cluster's default one (E2E_REMOTE_STORAGE_CLASS to choose another)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from annexctl import status as annexctl_status
from annexctl.clusters import connect
from shared.api.namespace_offloading import NAMESPACE_OFFLOADING
from shared.api.quota import QUOTA
from shared.wellknown import (
    REMOTE_STORAGE_CLASS_ALIAS_ANNOTATION,
    REMOTE_STORAGE_CLASS_ANNOTATION,
    VIRTUAL_STORAGE_PROVISIONER,
)
from tests.charts.helm import ROOT, render
from tests.conftest import ClusterHandle
from tests.e2e.conftest import consumer_user
from tests.e2e.test_offloading import REMOTE_STRATEGY, offloaded
from tests.helpers import wait_for
from tests.home_agent.conftest import RunningAgent
from tests.home_agent.play import custom, namespace_offloading, offload_namespace
from tests.remote_enforcer.conftest import PROVIDER_ID, Enforcer, webhook_configuration

STORAGE_WEBHOOK_NAME = "storage.enforcer.annex.e2e"
EXPANDABLE = "annex-e2e-expandable"
SMALL = "annex-e2e-small"
APP = {"app": "db"}


def remote_storage_class(remote: ClusterHandle) -> str:
    """The class the provider offers: E2E_REMOTE_STORAGE_CLASS, else its default one."""
    if os.environ.get("E2E_REMOTE_STORAGE_CLASS"):
        return os.environ["E2E_REMOTE_STORAGE_CLASS"]
    for storage_class in client.StorageV1Api(remote.api_client).list_storage_class().items:
        if (storage_class.metadata.annotations or {}).get(
                "storageclass.kubernetes.io/is-default-class") == "true":
            return str(storage_class.metadata.name)
    pytest.skip("the remote cluster has no default storage class to offer")


def simulated_class(remote: ClusterHandle, name: str, **fields: Any) -> str:
    """A class of kubesim's simulated CSI driver (made once per cluster)."""
    try:
        client.StorageV1Api(remote.api_client).create_storage_class({
            "metadata": {"name": name}, "provisioner": "csi.kubesim.io", **fields})
    except ApiException as error:
        if error.status != 409:
            raise
    return name


def expandable_class(remote: ClusterHandle) -> str | None:
    """A remote class that expands volumes: E2E_REMOTE_EXPANDABLE_CLASS, or on kubesim one of
    its simulated CSI driver, which grows the file system on the node (as most drivers do);
    None when there is none to offer."""
    if os.environ.get("E2E_REMOTE_EXPANDABLE_CLASS"):
        return os.environ["E2E_REMOTE_EXPANDABLE_CLASS"]
    if remote.sim is None:
        return None
    return simulated_class(remote, EXPANDABLE, allowVolumeExpansion=True,
                           parameters={"kubesim.io/node-expansion": "true"})


def small_class(remote: ClusterHandle) -> str | None:
    """On kubesim, a remote class whose backend holds 1Gi in all (provisioning past it fails)."""
    if remote.sim is None:
        return None
    return simulated_class(remote, SMALL, parameters={"kubesim.io/capacity": "1Gi"})


@pytest.fixture(scope="module")
def enforcer(remote: ClusterHandle, crds: None,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Enforcer]:
    """The enforcer offering the remote cluster's class (its default one: first, the offer's
    default), an expandable one when there is one and on kubesim a small one, its webhooks
    registered as the remote-enforcer chart registers them (ShadowPods, and the claims, Services,
    EndpointSlices and Ingresses of twin namespaces)."""
    offered = [remote_storage_class(remote)]
    for extra in (expandable_class(remote), small_class(remote)):
        if extra is not None and extra not in offered:
            offered.append(extra)
    process = Enforcer(remote.kubeconfig, tmp_path_factory.mktemp("enforcer"),
                       ["--offer-debounce-seconds", "0.1", "--storage-classes",
                        ",".join(offered)])
    process.start()
    configuration = webhook_configuration(process, STORAGE_WEBHOOK_NAME, STORAGE_WEBHOOK_NAME)
    registrations = client.AdmissionregistrationV1Api(remote.api_client)
    registrations.create_validating_webhook_configuration(configuration)
    try:
        yield process
    finally:
        registrations.delete_validating_webhook_configuration(STORAGE_WEBHOOK_NAME)
        process.stop()


@pytest.fixture(scope="module")
def virtual_class(home: ClusterHandle) -> str:
    """The home-agent chart's virtual storage class, installed at home."""
    [manifest] = [m for m in render(ROOT / "charts" / "home-agent", {"clusterId": "e2e"},
                                    release="annex", namespace="annex-e2e-agents")
                  if m["kind"] == "StorageClass"]
    assert manifest["provisioner"] == VIRTUAL_STORAGE_PROVISIONER
    try:
        client.StorageV1Api(home.api_client).create_storage_class(manifest)
    except ApiException as error:
        if error.status != 409:
            raise
    return str(manifest["metadata"]["name"])


def claim_template(storage_class: str, size: str = "1Gi") -> dict[str, Any]:
    return {"metadata": {"name": "data"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
        "resources": {"requests": {"storage": size}}}}


def stateful_set(replicas: int, storage_class: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "db"},
        "spec": {"replicas": replicas, "serviceName": "db",
                 "selector": {"matchLabels": APP},
                 "template": {"metadata": {"labels": APP}, "spec": {
                     "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "db", "image": "busybox:1.36",
                                     "command": ["sleep", "3600"],
                                     "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                     **REMOTE_STRATEGY}},
                 "volumeClaimTemplates": [claim_template(storage_class)]}}


def claims(handle: ClusterHandle, namespace: str) -> dict[str, Any]:
    return {c.metadata.name: c for c in handle.core.list_namespaced_persistent_volume_claim(
        namespace).items}


def home_volumes_of(home: ClusterHandle, namespace: str) -> dict[str, Any]:
    """The home volumes bound to claims of `namespace`, by claim name."""
    return {v.spec.claim_ref.name: v for v in home.core.list_persistent_volume().items
            if v.spec.claim_ref is not None and v.spec.claim_ref.namespace == namespace}


def events_on(home: ClusterHandle, namespace: str, name: str) -> dict[str, str]:
    return {e.reason: e.message for e in home.core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name}").items}


def pinned_to(volume: Any) -> list[str]:
    [term] = volume.spec.node_affinity.required.node_selector_terms
    [expression] = term.match_expressions
    assert expression.key == "kubernetes.io/hostname" and expression.operator == "In"
    return list(expression.values)


def running_remotely(remote: ClusterHandle, twin: str, names: set[str]) -> bool:
    pods = {p.metadata.name: p for p in remote.core.list_namespaced_pod(twin).items}
    return set(pods) == names and all(p.status.phase == "Running" for p in pods.values())


def test_a_stateful_set_runs_remotely_on_remote_volumes_pinned_at_home(
        home: ClusterHandle, remote: ClusterHandle, peered: RunningAgent, namespace: str,
        virtual_class: str) -> None:
    twin = offloaded(home, namespace)
    apps = client.AppsV1Api(home.api_client)
    apps.create_namespaced_stateful_set(namespace, stateful_set(3, virtual_class))
    names = {"data-db-0", "data-db-1", "data-db-2"}
    wait_for(lambda: apps.read_namespaced_stateful_set("db", namespace).status.ready_replicas
             == 3, timeout=180, message="the 3 replicas ready at home")
    wait_for(lambda: running_remotely(remote, twin, {"db-0", "db-1", "db-2"}), timeout=60,
             message="the 3 pods running remotely")
    home_claims = claims(home, namespace)
    remote_claims = wait_for(lambda: (c := claims(remote, twin)) and set(c) == names and all(
        r.status.phase == "Bound" for r in c.values()) and c, timeout=60,
        message="3 bound remote claims")
    assert set(home_claims) == names
    volumes = home_volumes_of(home, namespace)
    assert set(volumes) == names
    for name in names:
        assert home_claims[name].status.phase == "Bound"
        assert home_claims[name].spec.volume_name == volumes[name].metadata.name
        assert pinned_to(volumes[name]) == [peered.node_name]
        assert volumes[name].spec.capacity["storage"] == remote_claims[name].status.capacity[
            "storage"]
        assert remote_claims[name].spec.storage_class_name == remote_storage_class(remote)
    for pod in home.core.list_namespaced_pod(namespace).items:
        assert pod.spec.node_name == peered.node_name
    # each home claim says its remote claim is bound (the home one was Bound before it was)
    wait_for(lambda: all(
        {c.type: c.status for c in claim.status.conditions or []}.get("RemoteClaimBound")
        == "True" for claim in claims(home, namespace).values()), timeout=60,
        message="RemoteClaimBound True on the 3 home claims")
    # the remote claims' Events show on the home claims (the remote provisioner's)
    wait_for(lambda: any((e.source.component or "").endswith("(remote)")
                         for e in home.core.list_namespaced_event(
                             namespace, field_selector="involvedObject.name=data-db-0").items),
             timeout=60, message="a remote Event about data-db-0 at home")

    # a deleted pod comes back on the same virtual node, to the same volume
    remote_uid = remote_claims["data-db-1"].metadata.uid
    old = home.core.read_namespaced_pod("db-1", namespace).metadata.uid
    home.core.delete_namespaced_pod("db-1", namespace)
    back = wait_for(lambda: (p := home.core.read_namespaced_pod("db-1", namespace))
                    .metadata.uid != old and p.status.phase == "Running" and p, timeout=120,
                    message="db-1 back and running")
    assert back.spec.node_name == peered.node_name
    assert claims(home, namespace)["data-db-1"].spec.volume_name == \
        volumes["data-db-1"].metadata.name
    assert claims(remote, twin)["data-db-1"].metadata.uid == remote_uid
    wait_for(lambda: running_remotely(remote, twin, {"db-0", "db-1", "db-2"}), timeout=60)

    # scaling down and deleting the claims cleans up both sides
    apps.patch_namespaced_stateful_set("db", namespace, {"spec": {"replicas": 1}})
    wait_for(lambda: running_remotely(remote, twin, {"db-0"}), timeout=120,
             message="only db-0 left remotely")
    for name in ("data-db-1", "data-db-2"):
        home.core.delete_namespaced_persistent_volume_claim(name, namespace)
    wait_for(lambda: set(claims(remote, twin)) == {"data-db-0"}, timeout=60,
             message="the remote claims of the deleted ones gone")
    wait_for(lambda: set(home_volumes_of(home, namespace)) == {"data-db-0"}, timeout=60,
             message="their home volumes gone")
    assert set(claims(home, namespace)) == {"data-db-0"}


def pod_mounting(name: str, claim: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "app", "image": "busybox:1.36", "command": ["sleep", "3600"],
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
        **REMOTE_STRATEGY}}


def set_storage_quota(remote: ClusterHandle, consumer: str, storage: str) -> None:
    client.CustomObjectsApi(remote.api_client).create_namespaced_custom_object(
        QUOTA.group, QUOTA.version, f"annex-tenant-{consumer}", QUOTA.plural,
        {**QUOTA.type_meta(),
         "metadata": {"name": "storage"},
         "spec": {"consumerClusterId": consumer, "resources": {"requests.storage": storage}}})


def test_storage_beyond_the_quota_is_refused_on_the_home_claim(
        home: ClusterHandle, remote: ClusterHandle, peered: RunningAgent, namespace: str,
        virtual_class: str) -> None:
    set_storage_quota(remote, peered.home_id, "1Gi")
    offloaded(home, namespace)
    home.core.create_namespaced_persistent_volume_claim(namespace, claim_template(
        virtual_class, "2Gi"))
    home.core.create_namespaced_pod(namespace, pod_mounting("app", "data"))
    failed = wait_for(lambda: events_on(home, namespace, "data").get("ProvisioningFailed"),
                      timeout=60, message="ProvisioningFailed on the home claim")
    assert "quota exceeded for requests.storage" in failed
    assert claims(home, namespace)["data"].status.phase == "Pending"


@pytest.mark.parametrize("annotation", [REMOTE_STORAGE_CLASS_ANNOTATION,
                                        REMOTE_STORAGE_CLASS_ALIAS_ANNOTATION])
def test_a_class_the_provider_does_not_offer_is_refused_on_the_home_claim(
        home: ClusterHandle, remote: ClusterHandle, peered: RunningAgent, namespace: str,
        virtual_class: str, annotation: str) -> None:
    """Asked for by Liqo's annotation or annex's alias alike."""
    offloaded(home, namespace)
    body = claim_template(virtual_class)
    body["metadata"]["annotations"] = {annotation: "not-offered"}
    home.core.create_namespaced_persistent_volume_claim(namespace, body)
    home.core.create_namespaced_pod(namespace, pod_mounting("app", "data"))
    failed = wait_for(lambda: events_on(home, namespace, "data").get("ProvisioningFailed"),
                      timeout=60, message="ProvisioningFailed on the home claim")
    assert 'storage class "not-offered" is not offered' in failed


def test_a_pod_mounting_a_claim_bound_at_home_is_held_back(
        home: ClusterHandle, remote: ClusterHandle, peered: RunningAgent, namespace: str,
        tmp_path: Path) -> None:
    twin = offloaded(home, namespace)
    volume = f"home-{uuid.uuid4().hex[:8]}"
    home.core.create_persistent_volume({
        "metadata": {"name": volume},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "",
                 "nfs": {"server": "192.0.2.1", "path": "/exports/data"},
                 "claimRef": {"namespace": namespace, "name": "data"}}})
    try:
        home.core.create_namespaced_persistent_volume_claim(namespace, {
            **claim_template(""), "spec": {**claim_template("")["spec"], "volumeName": volume}})
        home.core.create_namespaced_pod(namespace, pod_mounting("app", "data"))
        held = wait_for(lambda: events_on(home, namespace, "app").get("OffloadingBackOff"),
                        timeout=60, message="OffloadingBackOff on the pod")
        assert '"data"' in held and "home volume" in held
        pod = home.core.read_namespaced_pod("app", namespace)
        assert pod.status.reason == "OffloadingBackOff"
        assert pod.status.phase == "Pending"
        assert remote.core.list_namespaced_pod(twin).items == []
    finally:
        home.core.delete_namespaced_pod("app", namespace, grace_period_seconds=0)
        try:
            home.core.delete_persistent_volume(volume)
        except ApiException as error:
            if error.status != 404:
                raise


def conditions_of(claim: Any) -> dict[str, str]:
    """A claim's resize conditions: their messages by type (RemoteClaimBound, which a home
    claim always has, left out)."""
    return {c.type: c.message or "" for c in claim.status.conditions or []
            if c.type != "RemoteClaimBound"}


def claim_in_use_remotely(home: ClusterHandle, remote: ClusterHandle, namespace: str,
                          twin: str, virtual_class: str, remote_class: str) -> None:
    """The claim `data` of the virtual class, asking the provider for `remote_class`, bound on
    both sides, mounted by the pod `app` running remotely."""
    body = claim_template(virtual_class)
    body["metadata"]["annotations"] = {REMOTE_STORAGE_CLASS_ANNOTATION: remote_class}
    home.core.create_namespaced_persistent_volume_claim(namespace, body)
    home.core.create_namespaced_pod(namespace, pod_mounting("app", "data"))
    wait_for(lambda: claims(remote, twin).get("data") is not None
             and claims(remote, twin)["data"].status.phase == "Bound"
             and claims(home, namespace)["data"].status.phase == "Bound"
             and running_remotely(remote, twin, {"app"}), timeout=90,
             message="the claim bound on both sides, its pod running remotely")


def test_resizing_the_home_claim_resizes_the_remote_one(
        home: ClusterHandle, remote: ClusterHandle, peered: RunningAgent, namespace: str,
        virtual_class: str) -> None:
    expandable = expandable_class(remote)
    if expandable is None:
        pytest.skip("no remote class that expands volumes (E2E_REMOTE_EXPANDABLE_CLASS)")
    twin = offloaded(home, namespace)
    claim_in_use_remotely(home, remote, namespace, twin, virtual_class, expandable)
    home.core.patch_namespaced_persistent_volume_claim("data", namespace, {
        "spec": {"resources": {"requests": {"storage": "2Gi"}}}})
    wait_for(lambda: claims(remote, twin)["data"].status.capacity["storage"] == "2Gi",
             timeout=60, message="the remote claim expanded")
    wait_for(lambda: claims(home, namespace)["data"].status.capacity["storage"] == "2Gi",
             timeout=60, message="the home claim's capacity follows")
    assert home_volumes_of(home, namespace)["data"].spec.capacity["storage"] == "2Gi"
    # the remote resizer's Event is reflected after the claim's status, on its own queue
    wait_for(lambda: "VolumeResizeSuccessful" in events_on(home, namespace, "data"),
             timeout=30, message="the VolumeResizeSuccessful Event reflected on the home claim")


def test_an_expansion_beyond_the_quota_is_refused_on_the_home_claim_and_nothing_breaks(
        home: ClusterHandle, remote: ClusterHandle, peered: RunningAgent, namespace: str,
        virtual_class: str) -> None:
    """The provider's quota refuses the expansion: the home claim shows it as a resizer shows
    a failed one (VolumeResizeFailed, ControllerResizeError), keeps its volume and its pod;
    once the quota allows it, the expansion goes through."""
    expandable = expandable_class(remote)
    if expandable is None:
        pytest.skip("no remote class that expands volumes (E2E_REMOTE_EXPANDABLE_CLASS)")
    set_storage_quota(remote, peered.home_id, "1Gi")
    twin = offloaded(home, namespace)
    claim_in_use_remotely(home, remote, namespace, twin, virtual_class, expandable)
    home.core.patch_namespaced_persistent_volume_claim("data", namespace, {
        "spec": {"resources": {"requests": {"storage": "2Gi"}}}})
    failed = wait_for(lambda: events_on(home, namespace, "data").get("VolumeResizeFailed"),
                      timeout=60, message="VolumeResizeFailed on the home claim")
    assert "quota exceeded for requests.storage" in failed
    refused = wait_for(lambda: conditions_of(claims(home, namespace)["data"]).get(
        "ControllerResizeError"), timeout=60, message="ControllerResizeError on the home claim")
    assert "quota exceeded for requests.storage" in refused
    held = claims(home, namespace)["data"]
    assert held.status.phase == "Bound" and held.status.capacity["storage"] == "1Gi"
    assert claims(remote, twin)["data"].spec.resources.requests["storage"] == "1Gi"
    assert running_remotely(remote, twin, {"app"})
    assert home.core.read_namespaced_pod("app", namespace).status.phase == "Running"

    client.CustomObjectsApi(remote.api_client).patch_namespaced_custom_object(
        QUOTA.group, QUOTA.version, f"annex-tenant-{peered.home_id}", QUOTA.plural, "storage",
        {"spec": {"resources": {"requests.storage": "2Gi"}}})
    wait_for(lambda: (c := claims(home, namespace)["data"]).status.capacity["storage"] == "2Gi"
             and "ControllerResizeError" not in conditions_of(c), timeout=120,
             message="the expansion through once the quota allows it, the refusal gone")


def test_a_file_system_resize_pending_remotely_shows_at_home_until_a_pod_mounts_the_claim(
        home: ClusterHandle, remote: ClusterHandle, peered: RunningAgent, namespace: str,
        virtual_class: str) -> None:
    """A claim expanded while no pod mounts it: the provider's resizer leaves the file system
    to grow on the node (FileSystemResizePending, if its driver does so: kubesim's does); the
    home claim shows it, and its grown capacity once a pod mounts it again."""
    expandable = expandable_class(remote)
    if expandable is None:
        pytest.skip("no remote class that expands volumes (E2E_REMOTE_EXPANDABLE_CLASS)")
    twin = offloaded(home, namespace)
    claim_in_use_remotely(home, remote, namespace, twin, virtual_class, expandable)
    home.core.delete_namespaced_pod("app", namespace, grace_period_seconds=0)
    wait_for(lambda: not remote.core.list_namespaced_pod(twin).items
             and not home.core.list_namespaced_pod(namespace).items, timeout=60,
             message="the pod gone on both sides")
    home.core.patch_namespaced_persistent_volume_claim("data", namespace, {
        "spec": {"resources": {"requests": {"storage": "2Gi"}}}})

    def remote_resize() -> str | None:
        found = claims(remote, twin)["data"]
        if "FileSystemResizePending" in conditions_of(found):
            return "pending"
        return "done" if found.status.capacity["storage"] == "2Gi" else None
    if wait_for(remote_resize, timeout=60, message="the remote claim resized") == "pending":
        pending = wait_for(lambda: conditions_of(claims(home, namespace)["data"]).get(
            "FileSystemResizePending"), timeout=60,
            message="FileSystemResizePending on the home claim")
        assert pending == conditions_of(claims(remote, twin)["data"])["FileSystemResizePending"]
        assert claims(home, namespace)["data"].status.capacity["storage"] == "1Gi"
    home.core.create_namespaced_pod(namespace, pod_mounting("app", "data"))
    wait_for(lambda: (c := claims(home, namespace)["data"]).status.capacity["storage"] == "2Gi"
             and not conditions_of(c), timeout=120,
             message="the home claim grown, its resize conditions gone")
    assert home_volumes_of(home, namespace)["data"].spec.capacity["storage"] == "2Gi"
    # the remote resizer's Event is reflected after the claim's status, on its own queue
    wait_for(lambda: "VolumeResizeSuccessful" in events_on(home, namespace, "data"),
             timeout=30, message="the VolumeResizeSuccessful Event reflected on the home claim")


@pytest.mark.kubesim_only(reason="a remote storage backend that is full (kubesim's CSI driver's "
                                 "capacity parameter)")
def test_the_remote_provisioners_failure_shows_on_the_home_claim(
        home: ClusterHandle, remote: ClusterHandle, peered: RunningAgent, namespace: str,
        virtual_class: str) -> None:
    small = small_class(remote)
    assert small is not None
    twin = offloaded(home, namespace)
    body = claim_template(virtual_class, "2Gi")
    body["metadata"]["annotations"] = {REMOTE_STORAGE_CLASS_ANNOTATION: small}
    home.core.create_namespaced_persistent_volume_claim(namespace, body)
    home.core.create_namespaced_pod(namespace, pod_mounting("app", "data"))

    def remote_failure() -> str | None:
        return next((e.message for e in home.core.list_namespaced_event(
            namespace, field_selector="involvedObject.name=data").items
            if e.reason == "ProvisioningFailed"
            and (e.source.component or "").endswith("(remote)")), None)
    failed = wait_for(remote_failure, timeout=60,
                      message="the remote provisioner's ProvisioningFailed on the home claim")
    assert "insufficient capacity" in failed
    assert claims(remote, twin)["data"].status.phase == "Pending"


@pytest.mark.kubesim_only(reason="the remote API server refuses the agent's identity alone "
                                 "(faults.refuse), which a real API server cannot be told to do")
def test_a_cut_loses_no_volume(home: ClusterHandle, remote: ClusterHandle,
                               peered: RunningAgent, namespace: str,
                               virtual_class: str) -> None:
    """The agent cut off the remote API server while the set changes on both sides: nothing
    deletes a remote claim, and everything converges afterwards on the same volumes."""
    twin = offloaded(home, namespace)
    apps = client.AppsV1Api(home.api_client)
    apps.create_namespaced_stateful_set(namespace, stateful_set(2, virtual_class))
    wait_for(lambda: apps.read_namespaced_stateful_set("db", namespace).status.ready_replicas
             == 2, timeout=180, message="the 2 replicas ready at home")
    before = {name: c.metadata.uid for name, c in claims(remote, twin).items()}
    assert set(before) == {"data-db-0", "data-db-1"}
    remote.sim.faults.refuse(user=consumer_user(peered.home_id))
    try:
        home.core.delete_namespaced_pod("db-1", namespace)
        apps.patch_namespaced_stateful_set("db", namespace, {"spec": {"replicas": 3}})
        remote.core.delete_namespaced_pod("db-0", twin)  # the enforcer recreates it
        wait_for(lambda: "db-0" in {p.metadata.name for p in remote.core.list_namespaced_pod(
            twin).items if p.metadata.deletion_timestamp is None}, timeout=60,
            message="db-0 recreated remotely during the cut")
        assert {n: c.metadata.uid for n, c in claims(remote, twin).items()} == before
    finally:
        remote.sim.faults.restore()
    wait_for(lambda: apps.read_namespaced_stateful_set("db", namespace).status.ready_replicas
             == 3, timeout=180, message="the 3 replicas ready at home after the cut")
    wait_for(lambda: running_remotely(remote, twin, {"db-0", "db-1", "db-2"}), timeout=60)
    after = {name: c.metadata.uid for name, c in claims(remote, twin).items()}
    assert set(after) == {"data-db-0", "data-db-1", "data-db-2"}
    assert {name: after[name] for name in before} == before  # the same volumes
    volumes = home_volumes_of(home, namespace)
    assert set(volumes) == set(after)
    assert all(pinned_to(v) == [peered.node_name] for v in volumes.values())


def home_default_class(home: ClusterHandle) -> str | None:
    for storage_class in client.StorageV1Api(home.api_client).list_storage_class().items:
        if (storage_class.metadata.annotations or {}).get(
                "storageclass.kubernetes.io/is-default-class") == "true":
            return str(storage_class.metadata.name)
    return None


def test_a_local_consumer_gets_its_volume_from_the_home_class(
        home: ClusterHandle, peer: Any, namespace: str, virtual_class: str) -> None:
    """A claim of the virtual class whose first pod runs on a physical home node: a real claim
    of the home class (--home-storage-class) beside it, and a volume copying the real one. (In a
    namespace offloaded to the agent: it reads the claims of no other.)"""
    home_class = home_default_class(home)
    if home_class is None:
        pytest.skip("the home cluster has no default storage class")
    peer("--home-storage-class", home_class)
    offload_namespace(home, namespace)  # LocalAndRemote: the pod may stay at home
    wait_for(lambda: (namespace_offloading(home, namespace).get("status") or {}).get(
        "offloadingPhase") == "Ready", timeout=60, message="namespace offloaded")
    home.core.create_namespaced_persistent_volume_claim(namespace, claim_template(virtual_class))
    local = pod_mounting("app", "data")
    local["spec"].pop("tolerations")
    local["spec"]["affinity"] = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
            "matchExpressions": [{"key": "liqo.io/type", "operator": "NotIn",
                                  "values": ["virtual-node"]}]}]}}}
    home.core.create_namespaced_pod(namespace, local)
    pod = wait_for(lambda: (p := home.core.read_namespaced_pod("app", namespace))
                   .status.phase == "Running" and p, timeout=120, message="the pod running")
    found = claims(home, namespace)
    virtual = found["data"]
    real = found[f"real-{virtual.metadata.uid}"]
    assert virtual.status.phase == real.status.phase == "Bound"
    assert real.spec.storage_class_name == home_class
    volume = home.core.read_persistent_volume(virtual.spec.volume_name)
    assert volume.metadata.annotations["offloading.liqo.io/real-volume"] == \
        real.spec.volume_name
    real_volume = home.core.read_persistent_volume(real.spec.volume_name)
    if real_volume.spec.node_affinity is not None:  # a node-local volume: the same node
        assert volume.spec.node_affinity == real_volume.spec.node_affinity
        assert pinned_to(volume) == [pod.spec.node_name]
    home.core.delete_namespaced_pod("app", namespace, grace_period_seconds=0)
    home.core.delete_namespaced_persistent_volume_claim("data", namespace)

    def gone() -> bool:
        names = {v.metadata.name for v in home.core.list_persistent_volume().items}
        return not claims(home, namespace) and volume.metadata.name not in names
    wait_for(gone, timeout=90, message="both claims and the virtual claim's volume gone")


def test_withdrawing_a_namespace_keeps_its_remote_claims_until_their_deletion_is_asked_for(
        home: ClusterHandle, remote: ClusterHandle, peered: RunningAgent, namespace: str,
        virtual_class: str) -> None:
    """Deleting the NamespaceOffloading withdraws nothing while the twin holds a claim: the
    NamespaceOffloading names it; spec.deleteRemoteClaims lets the withdrawal delete it."""
    twin = offloaded(home, namespace)
    home.core.create_namespaced_persistent_volume_claim(namespace, claim_template(virtual_class))
    home.core.create_namespaced_pod(namespace, pod_mounting("app", "data"))
    wait_for(lambda: "data" in claims(remote, twin), timeout=60, message="the remote claim")
    d = NAMESPACE_OFFLOADING
    custom(home).delete_namespaced_custom_object(d.group, d.version, namespace, d.plural,
                                                 "offloading")

    # The withdrawal waits: the twin and its claim stay, and the NamespaceOffloading says why.
    status = wait_for(lambda: (s := namespace_offloading(home, namespace).get("status") or {})
                      .get("retainedRemoteClaims") and s, timeout=60,
                      message="the retained claim reported")
    assert status["retainedRemoteClaims"] == {PROVIDER_ID: ["data"]}
    [ready] = status["remoteNamespacesConditions"][PROVIDER_ID]
    assert ready["reason"] == "RemoteClaimsRetained" and "data" in ready["message"]
    assert "data" in claims(remote, twin)
    assert remote.core.read_namespace(twin).metadata.deletion_timestamp is None
    report = annexctl_status.status(connect("home", str(home.kubeconfig)), offers=False)
    [extended] = [o for o in report.data["namespaceOffloadings"] if o["namespace"] == namespace]
    assert extended["retainedRemoteClaims"] == {PROVIDER_ID: ["data"]}
    [kept] = [t for t in report.tables if t.title.startswith("Remote claims kept")]
    assert [namespace, PROVIDER_ID, "data"] in kept.rows

    # Asked for, the claims go with the twin, and the withdrawal completes.
    custom(home).patch_namespaced_custom_object(
        d.group, d.version, namespace, d.plural, "offloading",
        {"spec": {"deleteRemoteClaims": True}})

    def withdrawn() -> bool:
        try:
            namespace_offloading(home, namespace)
        except ApiException as error:
            return error.status == 404
        return False

    wait_for(withdrawn, timeout=60, message="the NamespaceOffloading withdrawn")
    wait_for(lambda: "data" not in claims(remote, twin), timeout=60,
             message="the remote claim deleted with the twin")
