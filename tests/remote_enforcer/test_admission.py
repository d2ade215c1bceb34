"""The ShadowPod validating webhook, called by the cluster (ValidatingWebhookConfiguration)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from shared.api.quota import QUOTA
from shared.api.resource_offer import RESOURCE_OFFER
from shared.api.shadowpod import SHADOWPOD
from shared.quantity import format_quantity, parse_quantity
from shared.wellknown import ORIGIN_CLUSTER_LABEL, RESOURCE_OFFER_NAME
from tests.finish import finish, finishing_container
from tests.helpers import wait_for
from tests.remote_enforcer.conftest import (
    WEBHOOK_NAME,
    ShadowPods,
    make_tenant_namespace,
    make_twin_namespace,
    new_name,
    settled,
    shadowpod,
)
from tests.remote_enforcer.conftest import (
    denial as refusal,
)
from tests.remote_enforcer.test_pod_policy import set_consumer_pod_policy


def container(cpu: str | None = "100m", memory: str | None = "64Mi",
              limits: dict[str, str] | None = None) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    resources: dict[str, Any] = {"requests": requests}
    if limits is not None:
        resources["limits"] = limits
    return {"name": "main", "image": "nginx", "resources": resources}


@pytest.fixture
def consumer(remote: Any, enforcer: Any) -> str:
    return new_name("consumer")


def set_quota(remote: Any, namespace: str, consumer: str, enforcement: str,
              resources: dict[str, str], cordoned: bool = False) -> None:
    client.CustomObjectsApi(remote.api_client).create_namespaced_custom_object(
        QUOTA.group, QUOTA.version, namespace, QUOTA.plural,
        {**QUOTA.type_meta(),
         "metadata": {"name": f"quota-{consumer}"},
         "spec": {"consumerClusterId": consumer, "limitsEnforcement": enforcement,
                  "resources": resources, "cordoned": cordoned}})


def denial(action: Any) -> str:
    return refusal(WEBHOOK_NAME, action)


def test_the_origin_label_is_required(remote: Any, consumer: str,
                                      shadowpods: ShadowPods) -> None:
    twin = make_twin_namespace(remote, consumer)
    body = shadowpod(new_name("p"), consumer)
    del body["metadata"]["labels"][ORIGIN_CLUSTER_LABEL]
    assert denial(lambda: shadowpods.create(twin, body)) == (
        f"the {ORIGIN_CLUSTER_LABEL} label is required")


def test_the_origin_must_be_the_consumer_the_namespace_belongs_to(
        remote: Any, consumer: str, shadowpods: ShadowPods) -> None:
    twin = make_twin_namespace(remote, consumer)
    assert denial(lambda: shadowpods.create(twin, shadowpod(new_name("p"), "intruder"))) == (
        f"the {ORIGIN_CLUSTER_LABEL} label 'intruder' does not match the consumer "
        f"{consumer!r} namespace {twin!r} belongs to")


def test_a_namespace_of_no_consumer_gets_no_shadowpods(
        remote: Any, consumer: str, shadowpods: ShadowPods) -> None:
    plain = new_name("plain")
    remote.core.create_namespace({"metadata": {"name": plain}})
    assert denial(lambda: shadowpods.create(plain, shadowpod(new_name("p"), consumer))) == (
        f"namespace {plain!r} does not belong to any consumer")


def test_spec_changes_a_pod_does_not_allow_are_refused(
        remote: Any, consumer: str, shadowpods: ShadowPods) -> None:
    twin = make_twin_namespace(remote, consumer)
    name = new_name("p")
    shadowpods.create(twin, shadowpod(name, consumer))
    settled(shadowpods, twin, name)
    message = denial(lambda: shadowpods.patch(twin, name, {"spec": {"pod": {
        "containers": [{"name": "main", "image": "nginx:1", "command": ["sh"]}]}}}))
    assert message.startswith("spec.pod: Forbidden: pod updates may not change fields other "
                              "than `spec.containers[*].image`")
    # allowed: image, activeDeadlineSeconds, added tolerations (that the pod policy allows)
    set_consumer_pod_policy(remote, twin, consumer,
                            allowedTolerations=[{"key": "k", "operator": "Exists"}])
    wait_for(lambda: shadowpods.patch(twin, name, {"spec": {"pod": {
        "containers": [{"name": "main", "image": "nginx:2"}], "activeDeadlineSeconds": 60,
        "tolerations": [{"key": "k", "operator": "Exists"}]}}}),
        message="the update was not admitted once the policy allowed its toleration")


def test_soft_enforcement_requires_cpu_and_memory_requests(
        remote: Any, consumer: str, shadowpods: ShadowPods) -> None:
    twin = make_twin_namespace(remote, consumer)
    set_quota(remote, twin, consumer, "Soft", {"cpu": "1", "memory": "1Gi"})
    body = shadowpod(new_name("p"), consumer, {"containers": [container(memory=None)]})
    assert denial(lambda: shadowpods.create(twin, body)) == (
        "container 'main' does not request memory (required by Soft limits enforcement)")


def test_hard_enforcement_requires_requests_equal_to_limits(
        remote: Any, consumer: str, shadowpods: ShadowPods) -> None:
    twin = make_twin_namespace(remote, consumer)
    set_quota(remote, twin, consumer, "Hard", {"cpu": "1", "memory": "1Gi"})
    body = shadowpod(new_name("p"), consumer, {"containers": [
        container(limits={"cpu": "200m", "memory": "64Mi"})]})
    assert denial(lambda: shadowpods.create(twin, body)) == (
        "container 'main': cpu request 100m differs from its limit 200m "
        "(Hard limits enforcement)")


def test_the_message_names_the_short_resource_and_by_how_much(
        remote: Any, consumer: str, shadowpods: ShadowPods) -> None:
    twin = make_twin_namespace(remote, consumer)
    set_quota(remote, twin, consumer, "Soft", {"cpu": "1", "memory": "1Gi"})
    shadowpods.create(twin, shadowpod(new_name("p"), consumer,
                                      {"containers": [container(cpu="700m")]}))
    body = shadowpod(new_name("p"), consumer, {"containers": [container(cpu="500m")]})
    assert denial(lambda: shadowpods.create(twin, body)) == (
        "quota exceeded for cpu: requested 500m, used 700m of 1, short by 200m")


def test_a_shadowpod_refused_after_the_enforcer_admitted_it_is_admitted_when_tried_again(
        remote: Any, consumer: str, shadowpods: ShadowPods) -> None:
    """An admission step after the enforcer's (here a ResourceQuota of no ShadowPods; on a real
    cluster, also one not counted yet) refuses a ShadowPod the enforcer admitted: the same
    ShadowPod tried again is not held back by its own first try."""
    twin = make_twin_namespace(remote, consumer)
    set_quota(remote, twin, consumer, "Soft", {"cpu": "1", "memory": "1Gi"})
    body = shadowpod(new_name("p"), consumer, {"containers": [container(cpu="700m")]})
    remote.core.create_namespaced_resource_quota(twin, {
        "metadata": {"name": "none"}, "spec": {"hard": {f"count/{SHADOWPOD.plural}."
                                                        f"{SHADOWPOD.group}": "0"}}})

    # kube-apiserver's quota admission reads ResourceQuotas from an informer (and, in a
    # namespace the informer holds none of, from a list it keeps 30 s): a quota just made
    # refuses nothing until it is seen there
    def refused_on_dry_run() -> bool:
        try:
            shadowpods.create(twin, body, dry_run=True)
        except ApiException as error:
            return "exceeded quota: none" in (error.body or "")
        return False
    wait_for(refused_on_dry_run, 60, "the quota of no ShadowPods never refused one")
    with pytest.raises(ApiException) as refused:
        shadowpods.create(twin, body)
    assert "exceeded quota: none" in refused.value.body
    remote.core.delete_namespaced_resource_quota("none", twin)
    wait_for(lambda: shadowpods.create(twin, body), timeout=20,
             message="the ShadowPod tried again is admitted")


def test_the_quota_status_shows_what_is_used(
        remote: Any, consumer: str, shadowpods: ShadowPods) -> None:
    twin = make_twin_namespace(remote, consumer)
    set_quota(remote, twin, consumer, "Soft", {"cpu": "2", "memory": "1Gi"})
    for cpu in ("700m", "300m"):
        shadowpods.create(twin, shadowpod(new_name("p"), consumer,
                                          {"containers": [container(cpu=cpu, memory="256Mi")]}))

    def used() -> Any:
        return (client.CustomObjectsApi(remote.api_client).get_namespaced_custom_object(
            QUOTA.group, QUOTA.version, twin, QUOTA.plural, f"quota-{consumer}").get(
            "status") or {}).get("used")
    wait_for(lambda: used() == {"cpu": "1", "memory": "512Mi"},
             message="quota usage not reported")


def test_none_enforcement_still_refuses_requests_beyond_the_limits(
        remote: Any, consumer: str, shadowpods: ShadowPods) -> None:
    """None only waives stating requests: a pod without any is admitted (it counts as one pod),
    one whose requests do not fit is refused, as Liqo counts requests in every mode."""
    twin = make_twin_namespace(remote, consumer)
    set_quota(remote, twin, consumer, "None", {"cpu": "1", "pods": "2"})
    shadowpods.create(twin, shadowpod(new_name("p"), consumer, {"containers": [
        container(cpu=None, memory=None)]}))
    body = shadowpod(new_name("p"), consumer, {"containers": [container(cpu="1500m")]})
    assert denial(lambda: shadowpods.create(twin, body)) == (
        "quota exceeded for cpu: requested 1500m, used 0 of 1, short by 500m")


def test_a_consumer_without_a_quota_is_limited_by_its_offer(
        remote: Any, consumer: str, shadowpods: ShadowPods) -> None:
    """No Quota is not unlimited: the ResourceOffer published to the consumer is its limit."""
    tenant = make_tenant_namespace(remote, consumer)
    twin = make_twin_namespace(remote, consumer)
    offered = wait_for(lambda: client.CustomObjectsApi(
        remote.api_client).get_namespaced_custom_object(
        RESOURCE_OFFER.group, RESOURCE_OFFER.version, tenant, RESOURCE_OFFER.plural,
        RESOURCE_OFFER_NAME)["spec"]["resources"], message="no offer published")
    cpu = parse_quantity(offered["cpu"])
    asked = format_quantity(cpu + 1)
    body = shadowpod(new_name("p"), consumer, {"containers": [container(cpu=asked)]})
    assert denial(lambda: shadowpods.create(twin, body)) == (
        f"quota exceeded for cpu: requested {asked}, used 0 of {offered['cpu']}, short by 1")
    gpu = shadowpod(new_name("p"), consumer, {"containers": [{
        "name": "main", "image": "nginx", "resources": {"requests": {"example.com/gpu": "1"}}}]})
    assert denial(lambda: shadowpods.create(twin, gpu)) == (
        "example.com/gpu is neither offered to this consumer nor in its quota: requested 1, "
        "none available")
    shadowpods.create(twin, shadowpod(new_name("p"), consumer))  # within the offer


def test_a_cordoned_consumer_gets_no_new_shadowpods_but_deletes_pass(
        remote: Any, consumer: str, shadowpods: ShadowPods) -> None:
    twin = make_twin_namespace(remote, consumer)
    name = new_name("p")
    shadowpods.create(twin, shadowpod(name, consumer))
    set_quota(remote, twin, consumer, "None", {}, cordoned=True)
    assert denial(lambda: shadowpods.create(twin, shadowpod(new_name("p"), consumer))) == (
        "the consumer is cordoned: no new pods are admitted")
    shadowpods.api.delete_namespaced_custom_object(
        "offloading.liqo.io", "v1beta1", twin, "shadowpods", name)


def test_concurrent_creates_never_exceed_the_quota(
        remote: Any, consumer: str, shadowpods: ShadowPods) -> None:
    twin = make_twin_namespace(remote, consumer)
    set_quota(remote, twin, consumer, "Soft", {"cpu": "1", "memory": "10Gi"})
    bodies = [shadowpod(f"burst-{index}", consumer, {"containers": [container(cpu="100m")]})
              for index in range(20)]

    def create(body: dict[str, Any]) -> bool:
        try:
            shadowpods.create(twin, body)
            return True
        except ApiException as error:
            assert error.status == 403, error.body
            assert "quota exceeded for cpu" in json.loads(error.body)["message"]
            return False

    with ThreadPoolExecutor(max_workers=20) as pool:
        admitted = sum(pool.map(create, bodies))
    assert admitted == 10
    listed = shadowpods.api.list_namespaced_custom_object(
        "offloading.liqo.io", "v1beta1", twin, "shadowpods")["items"]
    assert len(listed) == 10
    wait_for(lambda: len(remote.core.list_namespaced_pod(twin).items) == 10)


def test_a_completed_shadowpod_frees_its_share_of_the_quota(
        remote: Any, consumer: str, shadowpods: ShadowPods) -> None:
    twin = make_twin_namespace(remote, consumer)
    set_quota(remote, twin, consumer, "Soft", {"cpu": "100m", "memory": "1Gi"})
    job = new_name("job")
    shadowpods.create(twin, shadowpod(job, consumer, {
        "restartPolicy": "Never",
        "containers": [{**container(cpu="100m"), **finishing_container()}]}))
    assert denial(lambda: shadowpods.create(twin, shadowpod(
        new_name("p"), consumer, {"containers": [container(cpu="100m")]}))).startswith(
        "quota exceeded for cpu")

    settled(shadowpods, twin, job)
    finish(remote.core, twin, job)
    settled(shadowpods, twin, job, "Succeeded")

    def admitted() -> bool:
        shadowpods.create(twin, shadowpod(new_name("p"), consumer,
                                          {"containers": [container(cpu="100m")]}))
        return True
    wait_for(admitted, message="the completed ShadowPod still holds its quota")


def test_a_shadowpod_over_a_mebibyte_is_reviewed(remote: Any, consumer: str,
                                                 shadowpods: ShadowPods) -> None:
    """The API server sends the whole object for review: a ShadowPod of 1.2 MiB (a large
    environment, well within what the API server stores) is admitted, not refused with 413 by
    the webhook server's own body limit."""
    twin = make_twin_namespace(remote, consumer)
    big = {"name": "main", "image": "nginx", "env": [{"name": "BLOB", "value": "x" * 1_200_000}]}
    name = new_name("big")
    shadowpods.create(twin, shadowpod(name, consumer, {"containers": [big]}))
    assert shadowpods.get(twin, name)["spec"]["pod"]["containers"][0]["env"][0]["value"] == (
        "x" * 1_200_000)
