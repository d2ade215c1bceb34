"""The ResourceOffer published in each tenant namespace follows the cluster's free capacity."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from kubernetes import client

from shared.api.resource_offer import RESOURCE_OFFER
from shared.quantity import parse_quantity
from shared.wellknown import (
    PROVIDER_LABEL,
    REGION_LABEL,
    REMOTE_CLUSTER_ID_LABEL,
    RESOURCE_OFFER_NAME,
    TENANT_NAMESPACE_LABEL,
)
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


@pytest.mark.kubesim_only(reason="sets a node's allocatable cpu by hand, which a real kubelet "
                                 "writes back at its next status update")
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


def test_an_offer_found_is_replaced_whole(remote: Any, enforcer: Any) -> None:
    """An offer written under another configuration (a label of a region no longer given) is
    brought to what the enforcer offers now, that label gone: a merge patch would keep it, and
    the enforcer would write it again at every look."""
    consumer = new_name("consumer")
    tenant = new_name("tenant")
    remote.core.create_namespace({"metadata": {"name": tenant}})
    offers = client.CustomObjectsApi(remote.api_client)
    offers.create_namespaced_custom_object(
        RESOURCE_OFFER.group, RESOURCE_OFFER.version, tenant, RESOURCE_OFFER.plural,
        {**RESOURCE_OFFER.type_meta(),
         "metadata": {"name": RESOURCE_OFFER_NAME},
         "spec": {"clusterId": PROVIDER_ID, "consumerClusterId": consumer,
                  "resources": {"cpu": "1"}, "labels": {"example.test/zone": "gone"}}})
    remote.core.patch_namespace(tenant, {"metadata": {"labels": {
        TENANT_NAMESPACE_LABEL: "true", REMOTE_CLUSTER_ID_LABEL: consumer}}})
    spec = wait_for(lambda: (found := offer(remote, tenant)).get("labels") == {
        REGION_LABEL: "eu-west", PROVIDER_LABEL: "annex-test"} and found, timeout=30,
        message=f"the offer was not replaced: {offer(remote, tenant)}")
    assert spec["consumerClusterId"] == consumer


def test_the_offer_tells_the_architecture_and_kubelet_version_of_the_remote_nodes(
        remote: Any, enforcer: Any) -> None:
    """The consumer may not read the provider's nodes: the offer is how it learns them."""
    from shared.offer import node_platform

    tenant = make_tenant_namespace(remote, new_name("consumer"))
    nodes = [remote.api_client.sanitize_for_serialization(n)
             for n in remote.core.list_node().items]
    expected = node_platform(nodes)
    assert expected, "the remote cluster has schedulable nodes reporting their platform"
    spec = wait_for(lambda: offer(remote, tenant), message="no offer published")
    assert (spec.get("architecture"), spec.get("kubeletVersion")) == (
        expected["architecture"], expected["kubeletVersion"])


def _publisher(*flags: str) -> Any:
    from annex.mirror import Mirror
    from remote_enforcer.offer import OfferPublisher
    from remote_enforcer.settings import parse

    return OfferPublisher(None, parse(["--cluster-id", PROVIDER_ID, *flags]),  # type: ignore[arg-type]
                          Mirror())


def _ready_node(name: str, pods: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {},
            "status": {"allocatable": {"cpu": "8", "pods": pods},
                       "conditions": [{"type": "Ready", "status": "True"}],
                       "nodeInfo": {"architecture": "arm64", "kubeletVersion": "v1.30.1"}}}


def test_a_fixed_offer_without_pods_lends_the_pods_the_nodes_hold() -> None:
    """Not a node of zero pod capacity: the pods the schedulable nodes can run."""
    publisher = _publisher("--offer-mode", "fixed", "--offer-resources", "cpu=4,memory=8Gi")
    assert publisher.resources_for("home")["pods"] == "0"  # no node known yet
    publisher.nodes.apply("ADDED", _ready_node("a", "110"))  # as the nodes' watch fills it
    publisher.nodes.apply("ADDED", _ready_node("b", "50"))
    spec = publisher.spec_for("home")
    assert spec["resources"] == {"cpu": "4", "memory": "8Gi", "pods": "160"}
    assert (spec["architecture"], spec["kubeletVersion"]) == ("arm64", "v1.30.1")

    named = _publisher("--offer-mode", "fixed", "--offer-resources", "cpu=4,pods=20")
    named.nodes.apply("ADDED", _ready_node("a", "110"))
    assert named.resources_for("home")["pods"] == "20"  # a pod count given is kept
