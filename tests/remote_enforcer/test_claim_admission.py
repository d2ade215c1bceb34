"""The reflected PersistentVolumeClaims' webhook, called by the cluster: offered classes, the
storage quota, and reflected claims kept from anyone but their consumer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from remote_enforcer.claim_admission import WEBHOOK_PATH
from shared.api.quota import QUOTA
from shared.ownership import ownership_labels
from shared.wellknown import ORIGIN_CLUSTER_LABEL
from tests.helpers import wait_for
from tests.remote_enforcer.conftest import (
    PROVIDER_ID,
    Enforcer,
    make_twin_namespace,
    new_name,
    running_enforcer,
)
from tests.remote_enforcer.conftest import (
    denial as refusal,
)

CLAIMS_WEBHOOK = "persistentvolumeclaims.enforcer.annex.test"


@pytest.fixture(scope="module")
def claims_enforcer(remote: Any, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[Enforcer]:
    """An enforcer offering the classes `standard` and `fast`, called for claims in twin
    namespaces (as the chart's second webhook)."""
    directory = tmp_path_factory.mktemp("claims-enforcer")
    with running_enforcer(remote, remote.kubeconfig, directory,
                          ["--storage-classes", "standard,fast"]) as process:
        registrations = client.AdmissionregistrationV1Api(remote.api_client)
        registrations.create_validating_webhook_configuration({
            "metadata": {"name": CLAIMS_WEBHOOK},
            "webhooks": [{
                "name": CLAIMS_WEBHOOK,
                "clientConfig": {"url": process.url.rsplit("/validate/", 1)[0] + WEBHOOK_PATH,
                                 "caBundle": process.ca_bundle},
                "namespaceSelector": {"matchExpressions": [
                    {"key": ORIGIN_CLUSTER_LABEL, "operator": "Exists"}]},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"],
                           "operations": ["CREATE", "UPDATE", "DELETE"],
                           "resources": ["persistentvolumeclaims"], "scope": "Namespaced"}],
                "admissionReviewVersions": ["v1"], "sideEffects": "NoneOnDryRun",
                "failurePolicy": "Fail", "timeoutSeconds": 10}]})
        try:
            yield process
        finally:
            registrations.delete_validating_webhook_configuration(CLAIMS_WEBHOOK)


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
        {"apiVersion": QUOTA.api_version, "kind": QUOTA.kind,
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
