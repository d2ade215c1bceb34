"""The reflected PersistentVolumeClaims' webhook, called by the cluster: offered classes, the
storage quota, no volume nor data the provisioner did not make for the claim, and reflected
claims kept from anyone but their consumer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from shared.api.quota import QUOTA
from shared.ownership import ownership_labels
from shared.wellknown import ORIGIN_CLUSTER_LABEL
from tests.helpers import wait_for
from tests.remote_enforcer.conftest import (
    PROVIDER_ID,
    WEBHOOK_DOMAIN,
    Enforcer,
    make_twin_namespace,
    new_name,
    running_enforcer,
)
from tests.remote_enforcer.conftest import (
    denial as refusal,
)
from tests.remote_enforcer.test_object_admission import consumer_tenant

CLAIMS_WEBHOOK = f"persistentvolumeclaims.{WEBHOOK_DOMAIN}"


@pytest.fixture(scope="module")
def claims_enforcer(remote: Any, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[Enforcer]:
    """An enforcer offering the classes `standard` and `fast`, called for claims in twin
    namespaces (as the chart's second webhook)."""
    directory = tmp_path_factory.mktemp("claims-enforcer")
    with running_enforcer(remote, remote.kubeconfig, directory,
                          ["--storage-classes", "standard,fast"]) as process:
        yield process


def claim(name: str, consumer: str, size: str = "1Gi",
          storage_class: str = "standard") -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": ownership_labels(consumer, PROVIDER_ID)},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                     "resources": {"requests": {"storage": size}}}}


def denial(action: Any) -> str:
    return refusal(CLAIMS_WEBHOOK, action)


def set_storage_quota(remote: Any, consumer: str, storage: str) -> str:
    """The consumer's Quota (in a namespace of its own); returns that namespace."""
    namespace = new_name("quotas")
    remote.core.create_namespace({"metadata": {"name": namespace}})
    client.CustomObjectsApi(remote.api_client).create_namespaced_custom_object(
        QUOTA.group, QUOTA.version, namespace, QUOTA.plural,
        {**QUOTA.type_meta(),
         "metadata": {"name": f"quota-{consumer}"},
         "spec": {"consumerClusterId": consumer, "resources": {"requests.storage": storage}}})
    return namespace


def used_storage(remote: Any, namespace: str, consumer: str) -> Any:
    quota = client.CustomObjectsApi(remote.api_client).get_namespaced_custom_object(
        QUOTA.group, QUOTA.version, namespace, QUOTA.plural, f"quota-{consumer}")
    return ((quota.get("status") or {}).get("used") or {}).get("requests.storage")


def test_a_class_the_offer_does_not_list_is_refused(remote: Any, claims_enforcer: Path) -> None:
    consumer = new_name("consumer")
    twin = make_twin_namespace(remote, consumer)
    assert denial(lambda: remote.core.create_namespaced_persistent_volume_claim(
        twin, claim("data", consumer, storage_class="gold"))) == (
        'storage class "gold" is not offered to this consumer (offered: standard, fast)')
    remote.core.create_namespaced_persistent_volume_claim(twin, claim("data", consumer,
                                                                      storage_class="fast"))


def test_storage_beyond_the_quota_is_refused_and_its_use_shown(
        remote: Any, claims_enforcer: Path) -> None:
    consumer = new_name("consumer")
    twin = make_twin_namespace(remote, consumer)
    quotas = set_storage_quota(remote, consumer, "3Gi")

    def create(name: str, size: str) -> Any:
        return remote.core.create_namespaced_persistent_volume_claim(
            twin, claim(name, consumer, size))

    # the enforcer sees the Quota through its watch: wait until it enforces it
    wait_for(lambda: _refused(lambda: create("probe", "4Gi")), timeout=30)
    create("a", "2Gi")
    message = denial(lambda: create("b", "2Gi"))
    assert message.startswith("quota exceeded for requests.storage: requested 2Gi, used 2Gi "
                              "of 3Gi"), message
    create("b", "1Gi")
    # what the consumer's claims take shows in the Quota's status
    wait_for(lambda: used_storage(remote, quotas, consumer) == "3Gi", timeout=30)


def _refused(action: Any) -> bool:
    try:
        action()
    except ApiException as error:
        return error.status == 403
    raise AssertionError("admitted beyond the quota")


def test_a_reflected_claim_is_deleted_only_by_its_consumer_or_with_its_namespace(
        remote: Any, claims_enforcer: Path) -> None:
    consumer = new_name("consumer")
    twin = make_twin_namespace(remote, consumer)
    remote.core.create_namespaced_persistent_volume_claim(twin, claim("data", consumer))
    message = denial(lambda: remote.core.delete_namespaced_persistent_volume_claim("data", twin))
    assert message.startswith(f"this claim holds the data of consumer {consumer}")
    # every claim of a twin namespace is the consumer's: it carries the origin label
    unlabelled = claim("own", consumer)
    del unlabelled["metadata"]["labels"]
    assert denial(lambda: remote.core.create_namespaced_persistent_volume_claim(
        twin, unlabelled)) == f"the {ORIGIN_CLUSTER_LABEL} label is required"
    remote.core.delete_namespace(twin)

    def namespace_gone() -> bool:
        try:
            remote.core.read_namespace(twin)
        except ApiException as error:
            return error.status == 404
        return False

    wait_for(namespace_gone, timeout=60)


def consumer_claims(remote: Any) -> tuple[Any, Any]:
    """A consumer's twin namespace, and the claims API as its identity."""
    tenant = consumer_tenant(remote)
    return tenant, client.CoreV1Api(tenant.shadowpods.api.api_client)


def test_a_claim_gets_a_volume_provisioned_for_it_never_an_existing_one(
        remote: Any, claims_enforcer: Path) -> None:
    tenant, core = consumer_claims(remote)

    def create(**spec: Any) -> Any:
        body = claim(new_name("data"), tenant.consumer)
        body["spec"].update(spec)
        return core.create_namespaced_persistent_volume_claim(tenant.twin, body)

    assert denial(lambda: create(volumeName="released-by-another-tenant")) == (
        "spec.volumeName: Forbidden: a claim of a twin namespace gets a volume provisioned for "
        "it, never an existing PersistentVolume of the provider")
    assert denial(lambda: create(selector={"matchLabels": {"export": "nfs"}})) == (
        "spec.selector: Forbidden: a claim of a twin namespace does not select existing "
        "PersistentVolumes of the provider")
    # (a dataSource of another kind alone is dropped by the API server: dataSourceRef keeps it)
    assert denial(lambda: create(dataSourceRef={"apiGroup": "example.com", "kind": "Backup",
                                                "name": "all"})).startswith(
        "spec.dataSource: Forbidden: a claim is made from a PersistentVolumeClaim or a "
        'VolumeSnapshot only, not a Backup of group "example.com"')
    create(dataSource={"kind": "PersistentVolumeClaim", "name": "seed"})  # its own namespace's


# kube-apiserver drops dataSourceRef.namespace unless the CrossNamespaceVolumeDataSource gate is
# on (alpha); kubesim keeps it, as a cluster with the gate on does.
@pytest.mark.kubesim_only(reason="kube-apiserver drops dataSourceRef.namespace unless the alpha "
                                 "CrossNamespaceVolumeDataSource gate is on; kubesim keeps it, as "
                                 "a cluster with the gate on does")
def test_a_claim_is_not_made_from_another_namespaces_data(
        remote: Any, claims_enforcer: Path) -> None:
    tenant, core = consumer_claims(remote)
    body = claim("copy", tenant.consumer)
    body["spec"]["dataSourceRef"] = {"apiGroup": "snapshot.storage.k8s.io",
                                     "kind": "VolumeSnapshot", "name": "db",
                                     "namespace": "other-tenant"}
    assert denial(lambda: core.create_namespaced_persistent_volume_claim(tenant.twin, body)) == (
        "spec.dataSourceRef.namespace: Forbidden: a claim is made from its own namespace's data "
        'only, not "other-tenant"\'s')


def test_the_consumer_does_not_bind_its_claim_the_volume_binder_does(
        remote: Any, claims_enforcer: Path) -> None:
    tenant, core = consumer_claims(remote)
    core.create_namespaced_persistent_volume_claim(tenant.twin, claim("data", tenant.consumer))
    bind = {"spec": {"volumeName": "static-nfs-export"}}
    assert denial(lambda: core.patch_namespaced_persistent_volume_claim(
        "data", tenant.twin, bind)) == (
        "spec.volumeName: Forbidden: the consumer does not bind a claim to a volume: the "
        "provider's PersistentVolume controller does")
    # the PV controller's binding (another identity) passes
    remote.core.patch_namespaced_persistent_volume_claim("data", tenant.twin, bind)
