"""What a consumer exposes in its twin namespaces, through the enforcer's network webhook and the
API server: Services, EndpointSlices and Ingresses written through the consumer's own identity
are refused beyond its service policy (closed by default), with the field and rule named.

The consumer's identity is granted these writes in its twin namespace by the test itself: what
is checked is admission, whatever role the provider binds."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from annex.mirror import Mirror
from remote_enforcer.consumers import Consumers
from remote_enforcer.object_admission import ObjectAdmission, PodAddresses
from shared.api.quota import QUOTA
from shared.ownership import ownership_labels
from shared.wellknown import CONSUMER_SERVICE_ACCOUNT
from tests.helpers import wait_for
from tests.remote_enforcer.conftest import (
    PROVIDER_ID,
    WEBHOOK_DOMAIN,
    ShadowPods,
    denial,
    make_tenant_namespace,
    make_twin_namespace,
    new_name,
    settled,
    shadowpod,
)
from tests.remote_enforcer.test_namespace_map import consumer_client
from tests.remote_enforcer.test_pod_policy import Tenant, set_consumer_pod_policy

NETWORK_WEBHOOK = f"network.{WEBHOOK_DOMAIN}"


# What the consumer writes in a twin namespace (as the provider's consumer role grants it).
CONSUMER_WRITES = [
    {"apiGroups": ["offloading.liqo.io"], "resources": ["shadowpods"], "verbs": ["*"]},
    {"apiGroups": [""], "resources": ["services", "persistentvolumeclaims"], "verbs": ["*"]},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["*"]},
    {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["*"]},
]


def consumer_tenant(remote: Any) -> Tenant:
    """A consumer with a tenant namespace, a twin namespace (labelled as the enforcer labels
    those it makes) and its identity, which may write there."""
    consumer = new_name("consumer")
    namespace = make_tenant_namespace(remote, consumer)
    twin = make_twin_namespace(remote, consumer)
    rbac = client.RbacAuthorizationV1Api(remote.api_client)
    rbac.create_namespaced_role(twin, {"metadata": {"name": "writes"},
                                       "rules": CONSUMER_WRITES})
    rbac.create_namespaced_role_binding(twin, {
        "metadata": {"name": "writes"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "writes"},
        "subjects": [{"kind": "ServiceAccount", "name": CONSUMER_SERVICE_ACCOUNT,
                      "namespace": namespace}]})
    return Tenant(consumer, namespace, twin, ShadowPods(consumer_client(remote, namespace)))


@pytest.fixture
def tenant(remote: Any, enforcer: Any) -> Tenant:
    return consumer_tenant(remote)


def refusal(action: Callable[[], Any]) -> str:
    return denial(NETWORK_WEBHOOK, action)


def admitted(action: Callable[[], Any]) -> bool:
    """True once `action` passes admission (the enforcer's watch of Quotas may lag a change)."""
    try:
        action()
    except ApiException as error:
        if error.status == 403:
            return False
        raise
    return True


def set_service_policy(remote: Any, tenant: Tenant, **policy: Any) -> None:
    """The consumer's Quota with this servicePolicy (camelCase fields)."""
    set_consumer_pod_policy(remote, tenant.namespace, tenant.consumer)
    client.CustomObjectsApi(remote.api_client).patch_namespaced_custom_object(
        QUOTA.group, QUOTA.version, tenant.namespace, QUOTA.plural, tenant.consumer,
        {"spec": {"servicePolicy": policy}})


def as_consumer(tenant: Tenant) -> client.ApiClient:
    return tenant.shadowpods.api.api_client


def service(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"selector": {"app": "demo"}, "ports": [{"port": 80}], **spec}}


def test_services_beyond_cluster_ip_are_refused_unless_the_provider_allows_them(
        remote: Any, tenant: Tenant) -> None:
    core = client.CoreV1Api(as_consumer(tenant))

    def create(**spec: Any) -> Any:
        return core.create_namespaced_service(tenant.twin, service(new_name("svc"), **spec))

    assert refusal(lambda: create(externalIPs=["203.0.113.7"])).startswith(
        "spec.externalIPs: Forbidden: the provider refuses external IPs: traffic to such an "
        "address is intercepted for the whole cluster (CVE-2020-8554)")
    for kind, risk in (("LoadBalancer", "a load balancer billed to the provider"),
                       ("NodePort", "a port on every node of the provider")):
        message = refusal(lambda kind=kind: create(type=kind))  # type: ignore[misc]
        assert message.startswith(f'spec.type: Forbidden: type "{kind}" is not allowed for '
                                  "this consumer"), message
        assert risk in message and "(servicePolicy.allowedServiceTypes: ClusterIP)" in message
    assert 'type "ExternalName" is not allowed' in refusal(lambda: core.create_namespaced_service(
        tenant.twin, {"metadata": {"name": new_name("alias")},
                      "spec": {"type": "ExternalName", "externalName": "db.example.com"}}))
    create()  # ClusterIP

    set_service_policy(remote, tenant, allowedServiceTypes=["ClusterIP", "NodePort"])
    wait_for(lambda: admitted(lambda: create(type="NodePort")), timeout=30,
             message="NodePort not allowed once the policy says so")
    # external IPs stay refused whatever the policy
    assert refusal(lambda: create(type="NodePort", externalIPs=["203.0.113.7"])).startswith(
        "spec.externalIPs: Forbidden")


def slice_body(*addresses: str) -> dict[str, Any]:
    return {"metadata": {"name": new_name("web"), "labels": {
                "kubernetes.io/service-name": "web",
                "endpointslice.kubernetes.io/managed-by": "by-hand"}},
            "addressType": "IPv4", "ports": [{"port": 80, "protocol": "TCP"}],
            "endpoints": [{"addresses": [address]} for address in addresses]}


def running_pod_ip(remote: Any, tenant: Tenant) -> str:
    """A ShadowPod of the consumer, run by the enforcer; its pod's address."""
    name = new_name("p")
    tenant.shadowpods.create(tenant.twin, shadowpod(name, tenant.consumer))
    settled(tenant.shadowpods, tenant.twin, name)
    return str(wait_for(lambda: remote.core.read_namespaced_pod(name, tenant.twin).status.pod_ip,
                        timeout=30, message="the twin pod got no address"))


def node_ip(remote: Any) -> str:
    node = remote.core.list_node().items[0]
    return next(a.address for a in node.status.addresses if a.type == "InternalIP")


def test_endpointslices_point_at_the_consumers_pods_or_its_allowed_cidrs_only(
        remote: Any, tenant: Tenant) -> None:
    discovery = client.DiscoveryV1Api(as_consumer(tenant))

    def create(*addresses: str) -> Any:
        return discovery.create_namespaced_endpoint_slice(tenant.twin, slice_body(*addresses))

    pod_ip = running_pod_ip(remote, tenant)
    create(pod_ip)
    for outside in ("10.96.0.1", node_ip(remote)):
        assert refusal(lambda outside=outside: create(pod_ip, outside)) == (  # type: ignore[misc]
            f'endpoints[1].addresses[0]: Forbidden: "{outside}" is neither a pod of this consumer'
            " nor in the CIDRs it may point at (servicePolicy.allowedEndpointCIDRs: none): a "
            "Service must not front the provider's network (CVE-2021-25740)")
    # the provider's own EndpointSlice controller writes the twin pods' slices: they pass
    client.CoreV1Api(as_consumer(tenant)).create_namespaced_service(
        tenant.twin, service("demo"))
    provider = client.DiscoveryV1Api(remote.api_client)
    wait_for(lambda: any(
        pod_ip in (e.addresses or []) for s in provider.list_namespaced_endpoint_slice(
            tenant.twin, label_selector="kubernetes.io/service-name=demo").items
        for e in s.endpoints or []), timeout=30, message="the controller's slice never came")

    # where the provider reaches the consumer's home pods
    set_service_policy(remote, tenant, allowedEndpointCIDRs=["198.18.0.0/16"])
    wait_for(lambda: admitted(lambda: create("198.18.4.2")), timeout=30,
             message="an address of the allowed CIDR still refused")


def ingress_body(host: str, annotations: dict[str, str] | None = None,
                 ingress_class: str = "public") -> dict[str, Any]:
    return {"metadata": {"name": new_name("web"), "annotations": annotations or {}},
            "spec": {"ingressClassName": ingress_class, "rules": [{"host": host, "http": {
                "paths": [{"path": "/", "pathType": "Prefix", "backend": {
                    "service": {"name": "web", "port": {"number": 80}}}}]}}]}}


def test_ingresses_claim_the_classes_and_hosts_the_provider_allows_and_carry_no_snippets(
        remote: Any, tenant: Tenant) -> None:
    networking = client.NetworkingV1Api(as_consumer(tenant))

    def create(host: str, **fields: Any) -> Any:
        return networking.create_namespaced_ingress(tenant.twin, ingress_body(host, **fields))

    assert refusal(lambda: create("shop.example.com")) == (
        'spec.ingressClassName: Forbidden: class "public" is not allowed for this consumer '
        "(servicePolicy.allowedIngressClasses: none); spec.rules[0].host: Forbidden: host "
        '"shop.example.com" is not allowed for this consumer '
        "(servicePolicy.allowedIngressHosts: none)")

    set_service_policy(remote, tenant, allowedIngressClasses=["public"],
                       allowedIngressHosts=["*.shop.example.com"])
    wait_for(lambda: admitted(lambda: create("www.shop.example.com")), timeout=30,
             message="an allowed class and host still refused")
    assert refusal(lambda: create("bank.example.com")) == (
        'spec.rules[0].host: Forbidden: host "bank.example.com" is not allowed for this consumer '
        "(servicePolicy.allowedIngressHosts: *.shop.example.com)")
    assert refusal(lambda: create("www.shop.example.com", ingress_class="internal")) == (
        'spec.ingressClassName: Forbidden: class "internal" is not allowed for this consumer '
        "(servicePolicy.allowedIngressClasses: public)")
    snippet = "nginx.ingress.kubernetes.io/configuration-snippet"
    assert refusal(lambda: create("www.shop.example.com", annotations={
        snippet: "proxy_pass http://169.254.169.254;"})) == (
        f"metadata.annotations[{snippet}]: Forbidden: configuration snippets run inside the "
        "provider's ingress controller, which serves other tenants too (CVE-2021-25742)")


def test_the_providers_own_namespaces_are_not_reviewed(remote: Any, tenant: Tenant) -> None:
    own = new_name("own")
    remote.core.create_namespace({"metadata": {"name": own}})
    remote.core.create_namespaced_service(own, service("edge", type="LoadBalancer"))


# --- the review itself, from the enforcer's caches (no cluster) --------------------------------

def review_of(objects: ObjectAdmission, operation: str, resource: str, obj: dict[str, Any],
              old: dict[str, Any] | None = None) -> tuple[bool, str]:
    return asyncio.run(objects.review({
        "operation": operation, "namespace": "twin", "resource": {"resource": resource},
        "object": obj, "oldObject": old}))


def cached_admission(late_pod_seconds: float = 0.0) -> ObjectAdmission:
    """An ObjectAdmission whose caches hold one twin namespace of consumer `home`."""
    consumers = Consumers(PROVIDER_ID, Mirror(), Mirror())
    consumers.namespaces.apply("ADDED", {"metadata": {
        "name": "twin", "labels": ownership_labels("home", PROVIDER_ID)}})
    consumers.listed.set()
    pods = PodAddresses()
    pods.listed.set()
    return ObjectAdmission(None, consumers, pods, late_pod_seconds)  # type: ignore[arg-type]


def test_an_update_is_refused_only_for_what_it_adds() -> None:
    objects = cached_admission()
    stored = service("edge", type="LoadBalancer")  # written before the policy narrowed
    relabelled = {**stored, "metadata": {"name": "edge", "finalizers": []}}
    assert review_of(objects, "UPDATE", "services", relabelled, stored) == (True, "")
    worse = service("edge", type="LoadBalancer", externalIPs=["203.0.113.7"])
    allowed, message = review_of(objects, "UPDATE", "services", worse, stored)
    assert not allowed and message.startswith("spec.externalIPs: Forbidden")


def pod(name: str, ip: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": "twin", "name": name}, "spec": spec,
            "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}}


def test_the_pods_addresses_are_their_running_pods_own() -> None:
    pods = PodAddresses()
    pods.on_pod("ADDED", pod("web", "10.244.0.5"))
    pods.on_pod("ADDED", pod("node-agent", "172.18.0.2", hostNetwork=True))  # the node's
    done = pod("job", "10.244.0.6")
    done["status"]["phase"] = "Succeeded"  # its address may go to another pod
    pods.on_pod("ADDED", done)
    assert pods.of(["twin"]) == {"10.244.0.5"}
    pods.on_pod("DELETED", {"metadata": {"namespace": "twin", "name": "web"}})
    assert pods.of(["twin"]) == frozenset()


def test_a_slice_written_before_the_watch_saw_its_pods_address_waits_for_it() -> None:
    objects = cached_admission(late_pod_seconds=5.0)

    async def slice_then_pod() -> tuple[bool, str]:
        review = asyncio.ensure_future(objects.review({
            "operation": "CREATE", "namespace": "twin",
            "resource": {"resource": "endpointslices"},
            "object": {**slice_body("10.244.0.9"), "metadata": {"namespace": "twin"}}}))
        await asyncio.sleep(0.05)
        objects.pods.on_pod("ADDED", pod("late", "10.244.0.9"))
        return await asyncio.wait_for(review, 1.0)

    assert asyncio.run(slice_then_pod()) == (True, "")
