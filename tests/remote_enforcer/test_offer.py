"""The ResourceOffer published in each tenant namespace follows the cluster's free capacity."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from kubernetes import client

from shared.api.resource_offer import RESOURCE_OFFER
from shared.quantity import parse_quantity
from shared.wellknown import PROVIDER_LABEL, REGION_LABEL, RESOURCE_OFFER_NAME
from tests.helpers import wait_for
from tests.remote_enforcer.conftest import PROVIDER_ID, make_tenant_namespace, new_name


def offer(remote: Any, tenant: str) -> dict[str, Any]:
    return client.CustomObjectsApi(remote.api_client).get_namespaced_custom_object(  # type: ignore[no-any-return]
        RESOURCE_OFFER.group, RESOURCE_OFFER.version, tenant, RESOURCE_OFFER.plural,
        RESOURCE_OFFER_NAME)["spec"]


def offered_cpu(remote: Any, tenant: str) -> Decimal:
    return parse_quantity(offer(remote, tenant)["resources"]["cpu"])


def set_allocatable_cpu(remote: Any, node: str, cpu: str) -> None:
    client.CoreV1Api(remote.api_client).patch_node_status(
        node, {"status": {"allocatable": {"cpu": cpu}}})


@pytest.mark.kubesim_only
def test_the_offer_is_half_the_free_capacity_and_follows_changes(
        remote: Any, enforcer: Any) -> None:
    consumer = new_name("consumer")
    tenant = make_tenant_namespace(remote, consumer)
    spec = wait_for(lambda: offer(remote, tenant), message="no offer published")
    assert spec["clusterId"] == PROVIDER_ID
    assert spec["consumerClusterId"] == consumer
    assert spec["labels"] == {REGION_LABEL: "eu-west", PROVIDER_LABEL: "annex-test"}
    before = offered_cpu(remote, tenant)

    # Capacity grows by 2 cpus: half of it is offered.
    node = remote.core.list_node().items[0]
    allocatable = parse_quantity(node.status.allocatable["cpu"])
    set_allocatable_cpu(remote, node.metadata.name, str(allocatable + 2))
    try:
        wait_for(lambda: offered_cpu(remote, tenant) == before + 1,
                 message="the offer did not grow with the node")

        # A pod of somebody else requesting 1 cpu takes half a cpu off the offer.
        namespace = new_name("other")
        remote.core.create_namespace({"metadata": {"name": namespace}})
        remote.core.create_namespaced_pod(namespace, {"metadata": {"name": "busy"}, "spec": {
            "containers": [{"name": "main", "image": "busybox",
                            "resources": {"requests": {"cpu": "1"}}}]}})
        wait_for(lambda: offered_cpu(remote, tenant) == before + Decimal("0.5"),
                 message="the offer did not shrink for a new pod")
        remote.core.delete_namespaced_pod("busy", namespace, grace_period_seconds=0)
        wait_for(lambda: offered_cpu(remote, tenant) == before + 1,
                 message="the offer did not grow back after the pod left")
    finally:
        set_allocatable_cpu(remote, node.metadata.name, str(allocatable))
    wait_for(lambda: offered_cpu(remote, tenant) == before)
