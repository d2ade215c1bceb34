"""What a consumer may expose through the Services, EndpointSlices and Ingresses it writes in its
twin namespaces: closed by default, opened by the provider per consumer (servicePolicy)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.api.quota import ServicePolicy
from shared.service_policy import (
    endpointslice_problems,
    host_allowed,
    ingress_problems,
    service_problems,
)

DEFAULT = ServicePolicy()


def policy(**fields: Any) -> ServicePolicy:
    return ServicePolicy.model_validate(fields)


def service(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": "twin"},
            "spec": {"ports": [{"port": 80}], **spec}}


# --- Service ----------------------------------------------------------------------------------

def test_a_cluster_ip_service_is_allowed_by_default() -> None:
    assert service_problems(service(), DEFAULT) == []
    assert service_problems(service(type="ClusterIP", clusterIP="None"), DEFAULT) == []


def test_external_ips_are_refused_whatever_the_policy() -> None:
    everything = policy(allowedServiceTypes=["ClusterIP", "NodePort", "LoadBalancer",
                                             "ExternalName"])
    [problem] = service_problems(service(externalIPs=["10.0.0.1"]), everything)
    assert problem.startswith("spec.externalIPs: Forbidden: ")
    assert "CVE-2020-8554" in problem


@pytest.mark.parametrize(("kind", "risk"), [
    ("NodePort", "it opens a port on every node of the provider"),
    ("LoadBalancer", "it provisions a load balancer billed to the provider"),
    ("ExternalName", "it makes the Service's name an alias of any DNS name"),
])
def test_other_types_are_refused_unless_the_policy_allows_them(kind: str, risk: str) -> None:
    spec: dict[str, Any] = {"type": kind}
    if kind == "ExternalName":
        spec["externalName"] = "db.example.com"
    assert service_problems(service(**spec), DEFAULT) == [
        f'spec.type: Forbidden: type "{kind}" is not allowed for this consumer ({risk}) '
        "(servicePolicy.allowedServiceTypes: ClusterIP)"]
    assert service_problems(service(**spec), policy(
        allowedServiceTypes=["ClusterIP", kind])) == []


def test_a_cluster_ip_service_opens_no_node_port() -> None:
    assert service_problems(service(ports=[{"port": 80}, {"port": 81, "nodePort": 30080}]),
                            DEFAULT) == [
        "spec.ports[1].nodePort: Forbidden: a ClusterIP Service opens no port on the "
        "provider's nodes"]


def test_only_the_types_the_policy_lists_are_allowed() -> None:
    node_ports_only = policy(allowedServiceTypes=["NodePort"])
    assert service_problems(service(type="NodePort"), node_ports_only) == []
    [problem] = service_problems(service(), node_ports_only)
    assert problem.startswith('spec.type: Forbidden: type "ClusterIP" is not allowed')


# --- EndpointSlice ----------------------------------------------------------------------------

def endpointslice(*addresses: str, address_type: str = "IPv4",
                  target: dict[str, Any] | None = None) -> dict[str, Any]:
    endpoint: dict[str, Any] = {"addresses": list(addresses)}
    if target is not None:
        endpoint["targetRef"] = target
    return {"metadata": {"name": "web-1", "namespace": "twin"}, "addressType": address_type,
            "endpoints": [endpoint]}


TWIN_PODS = frozenset({"10.244.1.7", "fd00::7"})


def test_a_slice_may_point_at_the_consumers_twin_pods() -> None:
    assert endpointslice_problems(endpointslice("10.244.1.7"), DEFAULT, TWIN_PODS) == []
    assert endpointslice_problems(endpointslice("fd00:0::7", address_type="IPv6"), DEFAULT,
                                  TWIN_PODS) == []


@pytest.mark.parametrize("address", ["10.96.0.1", "172.18.0.2", "169.254.169.254"])
def test_a_slice_pointing_elsewhere_is_refused(address: str) -> None:
    assert endpointslice_problems(endpointslice("10.244.1.7", address), DEFAULT, TWIN_PODS) == [
        f'endpoints[0].addresses[1]: Forbidden: "{address}" is neither a pod of this consumer '
        "nor in the CIDRs it may point at (servicePolicy.allowedEndpointCIDRs: none): a Service "
        "must not front the provider's network (CVE-2021-25740)"]


def test_the_policy_allows_the_cidrs_the_consumers_pods_are_reached_through() -> None:
    remapped = policy(allowedEndpointCIDRs=["198.18.0.0/16", "fd00:b::/64"])
    assert endpointslice_problems(endpointslice("198.18.3.4"), remapped, frozenset()) == []
    [problem] = endpointslice_problems(endpointslice("198.19.0.1"), remapped, frozenset())
    assert "(servicePolicy.allowedEndpointCIDRs: 198.18.0.0/16, fd00:b::/64)" in problem


def test_fqdn_endpoints_are_refused() -> None:
    [problem] = endpointslice_problems(endpointslice("db.example.com", address_type="FQDN"),
                                       DEFAULT, TWIN_PODS)
    assert problem.startswith("addressType: Forbidden: FQDN endpoints")


def test_an_endpoint_refers_to_objects_of_its_own_namespace_only() -> None:
    elsewhere = {"kind": "Pod", "namespace": "kube-system", "name": "coredns-1"}
    assert endpointslice_problems(endpointslice("10.244.1.7", target=elsewhere), DEFAULT,
                                  TWIN_PODS) == [
        "endpoints[0].targetRef.namespace: Forbidden: an endpoint refers to an object of this "
        'namespace only, not of "kube-system"']
    here = {"kind": "Pod", "namespace": "twin", "name": "web-0"}
    assert endpointslice_problems(endpointslice("10.244.1.7", target=here), DEFAULT,
                                  TWIN_PODS) == []
    # reflection names home pods as RemotePod, in their home namespace: no provider object
    home = {"kind": "RemotePod", "namespace": "shop", "name": "web-0"}
    assert endpointslice_problems(endpointslice("10.244.1.7", target=home), DEFAULT,
                                  TWIN_PODS) == []


# --- Ingress ----------------------------------------------------------------------------------

OPEN = policy(allowedIngressClasses=["public"], allowedIngressHosts=["shop.example.com",
                                                                   "*.apps.example.com"])


def ingress(*hosts: str, annotations: dict[str, str] | None = None,
            **spec: Any) -> dict[str, Any]:
    backend = {"service": {"name": "web", "port": {"number": 80}}}
    return {"metadata": {"name": "web", "namespace": "twin", "annotations": annotations or {}},
            "spec": {"ingressClassName": "public", "rules": [
                {"host": host, "http": {"paths": [{"path": "/", "pathType": "Prefix",
                                                   "backend": backend}]}} for host in hosts],
                     **spec}}


def test_an_ingress_is_allowed_for_an_allowed_class_and_host() -> None:
    assert ingress_problems(ingress("shop.example.com", "a.apps.example.com",
                                    tls=[{"hosts": ["shop.example.com"]}]), OPEN) == []


def test_no_ingress_is_allowed_by_default() -> None:
    assert ingress_problems(ingress("shop.example.com"), DEFAULT) == [
        'spec.ingressClassName: Forbidden: class "public" is not allowed for this consumer '
        "(servicePolicy.allowedIngressClasses: none)",
        'spec.rules[0].host: Forbidden: host "shop.example.com" is not allowed for this '
        "consumer (servicePolicy.allowedIngressHosts: none)"]


def test_an_ingress_names_an_allowed_class() -> None:
    classless = ingress("shop.example.com")
    del classless["spec"]["ingressClassName"]
    [problem] = ingress_problems(classless, OPEN)
    assert problem.startswith("spec.ingressClassName: Required value: set one of the classes "
                              "the provider allows (servicePolicy.allowedIngressClasses: public)")
    legacy = {"kubernetes.io/ingress.class": "internal"}
    classless["metadata"]["annotations"] = legacy
    assert ingress_problems(classless, OPEN) == [
        "metadata.annotations[kubernetes.io/ingress.class]: Forbidden: class \"internal\" is "
        "not allowed for this consumer (servicePolicy.allowedIngressClasses: public)"]
    classless["metadata"]["annotations"] = {"kubernetes.io/ingress.class": "public"}
    assert ingress_problems(classless, OPEN) == []


def test_every_host_an_ingress_claims_must_be_allowed() -> None:
    problems = ingress_problems(ingress("shop.example.com", "bank.example.com", "",
                                        tls=[{"hosts": ["a.b.apps.example.com"]}]), OPEN)
    assert [p.split(":")[0] for p in problems] == [
        "spec.rules[1].host", "spec.rules[2].host", "spec.tls[0].hosts[0]"]
    assert "Required value: a rule without a host serves every host name" in problems[1]


def test_a_default_backend_is_refused() -> None:
    backend = {"service": {"name": "web", "port": {"number": 80}}}
    [problem] = ingress_problems(ingress("shop.example.com", defaultBackend=backend), OPEN)
    assert problem.startswith("spec.defaultBackend: Forbidden: ")


@pytest.mark.parametrize(("host", "allowed"), [
    ("a.apps.example.com", True), ("A.Apps.Example.com", True), ("*.apps.example.com", True),
    ("apps.example.com", False), ("a.b.apps.example.com", False),
    ("*.b.apps.example.com", False), ("shop.example.com", True), ("x.shop.example.com", False),
])
def test_a_wildcard_allows_one_label_in_its_place(host: str, allowed: bool) -> None:
    assert host_allowed(host, OPEN.allowed_ingress_hosts) is allowed


@pytest.mark.parametrize("annotation", [
    "nginx.ingress.kubernetes.io/configuration-snippet",
    "nginx.ingress.kubernetes.io/server-snippet", "nginx.ingress.kubernetes.io/auth-snippet",
    "nginx.org/location-snippets"])
def test_controller_snippets_are_refused(annotation: str) -> None:
    assert ingress_problems(ingress("shop.example.com", annotations={
        annotation: "return 200;", "nginx.ingress.kubernetes.io/rewrite-target": "/"}), OPEN) == [
        f"metadata.annotations[{annotation}]: Forbidden: configuration snippets run inside the "
        "provider's ingress controller, which serves other tenants too (CVE-2021-25742)"]


def test_only_service_backends_are_allowed() -> None:
    bucket = ingress("shop.example.com")
    bucket["spec"]["rules"][0]["http"]["paths"][0]["backend"] = {"resource": {
        "apiGroup": "k8s.example.com", "kind": "StorageBucket", "name": "static"}}
    assert ingress_problems(bucket, OPEN) == [
        "spec.rules[0].http.paths[0].backend.resource: Forbidden: only Service backends are "
        "allowed"]
