"""Defaulting and validation of the kinds reflection and the virtual node write, as
kube-apiserver does it: node allocatable, EndpointSlice addresses, Service node ports."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.helpers import wait_for
from tests.kubesim.rest import MERGE, STRATEGIC, call


@pytest.fixture
def node_name(home) -> Iterator[str]:
    name = f"t-node-{uuid.uuid4().hex[:8]}"
    yield name
    call(home, "DELETE", f"/api/v1/nodes/{name}")


def test_a_node_stating_only_its_capacity_gets_it_as_allocatable(home, node_name: str) -> None:
    capacity = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    status, node = call(home, "POST", "/api/v1/nodes",
                        {"metadata": {"name": node_name}, "status": {"capacity": capacity}})
    assert status == 201, node
    assert node["status"]["allocatable"] == capacity
    # a status write that states a new capacity without allocatable: defaulted again
    node["status"] = {"capacity": {"cpu": "8", "pods": "10"}}
    del node["metadata"]["resourceVersion"]  # unconditional: controllers may write it meanwhile
    status, node = call(home, "PUT", f"/api/v1/nodes/{node_name}/status", node)
    assert status == 200, node
    assert node["status"]["allocatable"] == {"cpu": "8", "pods": "10"}
    # a patch leaves a stated allocatable alone
    status, node = call(home, "PATCH", f"/api/v1/nodes/{node_name}/status",
                        {"status": {"capacity": {"cpu": "16"}, "allocatable": {"cpu": "15"}}},
                        content_type=STRATEGIC)
    assert node["status"]["allocatable"] == {"cpu": "15", "pods": "10"}
    status, node = call(home, "PATCH", f"/api/v1/nodes/{node_name}/status",
                        {"status": {"capacity": {"cpu": "32"}}}, content_type=MERGE)
    assert node["status"]["allocatable"] == {"cpu": "15", "pods": "10"}


def slice_path(namespace: str, name: str = "") -> str:
    return (f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"
            + (f"/{name}" if name else ""))


def endpoint_slice(name: str, address_type: str, *addresses: str) -> dict:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name}, "addressType": address_type,
            "endpoints": [{"addresses": list(addresses)}] if addresses else []}


def test_endpoint_slices_are_validated_for_their_address_type(home, namespace) -> None:
    def refused(name: str, address_type: str, address: str, why: str) -> tuple[dict, str]:
        return (endpoint_slice(name, address_type, address),
                f'EndpointSlice.discovery.k8s.io "{name}" is invalid: endpoints[0].addresses[0]: '
                f'Invalid value: "{address}": {why}')

    cases = [
        (endpoint_slice("a", "IPv4", "bad-ip"), 'EndpointSlice.discovery.k8s.io "a" is invalid: '
         '[endpoints[0].addresses[0]: Invalid value: "bad-ip": must be a valid IPv4 address, '
         'endpoints[0].addresses[0]: Invalid value: "bad-ip": must be a valid IP address]'),
        refused("f", "IPv4", "127.0.0.2", "may not be in the loopback range (127.0.0.0/8, "
                                          "::1/128)"),
        refused("g", "IPv6", "fe80::1", "may not be in the link-local range (169.254.0.0/16, "
                                        "fe80::/10)"),
        refused("h", "IPv4", "0.0.0.0", "may not be unspecified (0.0.0.0)"),
        (endpoint_slice("b", "IPv6", "10.0.0.1"), 'EndpointSlice.discovery.k8s.io "b" is invalid: '
         'endpoints[0].addresses[0]: Invalid value: "10.0.0.1": must be a valid IPv6 address'),
        (endpoint_slice("c", "Bogus", "10.0.0.1"), 'EndpointSlice.discovery.k8s.io "c" is invalid: '
         'addressType: Unsupported value: "Bogus": supported values: "FQDN", "IPv4", "IPv6"'),
        (endpoint_slice("d", "FQDN", "single"), 'EndpointSlice.discovery.k8s.io "d" is invalid: '
         'endpoints[0].addresses[0]: Invalid value: "single": should be a domain with at least '
         'two segments separated by dots'),
        ({**endpoint_slice("e", "IPv4"), "endpoints": [{"addresses": []}]},
         'EndpointSlice.discovery.k8s.io "e" is invalid: endpoints[0].addresses: Required value: '
         'must contain at least 1 address'),
    ]
    for body, message in cases:
        status, answer = call(home, "POST", slice_path(namespace), body)
        assert (status, answer.get("reason"), answer.get("message")) == (422, "Invalid", message)
    for body in (endpoint_slice("v4", "IPv4", "10.1.2.3"), endpoint_slice("v6", "IPv6", "fd00::1"),
                 endpoint_slice("dns", "FQDN", "db.example.com")):
        status, answer = call(home, "POST", slice_path(namespace), body)
        assert status == 201, answer
    status, answer = call(home, "PATCH", slice_path(namespace, "v4"), {"addressType": "IPv6"},
                          content_type=MERGE)
    assert (status, answer["reason"]) == (422, "Invalid")
    assert 'addressType: Invalid value: "IPv6": field is immutable' in answer["message"]


def services(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/services" + (f"/{name}" if name else "")


def node_port_service(name: str, *node_ports: int, type_: str = "NodePort") -> dict:
    ports = [{"name": f"p{i}", "port": 80 + i, **({"nodePort": p} if p else {})}
             for i, p in enumerate(node_ports)]
    return {"metadata": {"name": name}, "spec": {"type": type_, "ports": ports}}


def test_node_ports_are_allocated_kept_refused_and_released(home, namespace) -> None:
    status, a = call(home, "POST", services(namespace), node_port_service("a", 0, 0))
    assert status == 201, a
    taken = [p["nodePort"] for p in a["spec"]["ports"]]
    assert all(30000 <= p <= 32767 for p in taken) and len(set(taken)) == 2
    status, body = call(home, "POST", services(namespace), node_port_service("b", taken[0]))
    assert (status, body["message"]) == (422, (
        f'Service "b" is invalid: spec.ports[0].nodePort: Invalid value: {taken[0]}: provided '
        f'port is already allocated'))
    status, body = call(home, "POST", services(namespace), node_port_service("c", 1))
    assert (status, body["message"]) == (422, (
        'Service "c" is invalid: spec.ports[0].nodePort: Invalid value: 1: provided port is not '
        'in the valid range. The range of valid ports is 30000-32767'))
    status, body = call(home, "POST", services(namespace),
                        node_port_service("d", taken[0], type_="ClusterIP"))
    assert (status, body["message"]) == (422, (
        'Service "d" is invalid: spec.ports[0].nodePort: Forbidden: may not be used when `type` '
        "is 'ClusterIP'"))
    # an update that leaves the node ports out keeps them (matched by port name)
    a["spec"]["ports"] = [{"name": p["name"], "port": p["port"]} for p in a["spec"]["ports"]]
    del a["metadata"]["resourceVersion"]
    status, a = call(home, "PUT", services(namespace, "a"), a)
    assert status == 200, a
    assert [p["nodePort"] for p in a["spec"]["ports"]] == taken
    # a LoadBalancer gets node ports too, unless it says it does not need them
    status, lb = call(home, "POST", services(namespace), node_port_service(
        "lb", 0, type_="LoadBalancer"))
    assert status == 201 and 30000 <= lb["spec"]["ports"][0]["nodePort"] <= 32767
    bare = node_port_service("bare", 0, type_="LoadBalancer")
    bare["spec"]["allocateLoadBalancerNodePorts"] = False
    status, bare = call(home, "POST", services(namespace), bare)
    assert status == 201 and "nodePort" not in bare["spec"]["ports"][0]
    # leaving NodePort drops the ports and frees them; so does deleting the Service
    status, a = call(home, "PATCH", services(namespace, "a"), {"spec": {"type": "ClusterIP"}},
                     content_type=MERGE)
    assert status == 200, a
    assert all("nodePort" not in p for p in a["spec"]["ports"])
    status, b = call(home, "POST", services(namespace), node_port_service("b", taken[0]))
    assert status == 201, b
    assert call(home, "DELETE", services(namespace, "b"))[0] == 200
    status, e = call(home, "POST", services(namespace), node_port_service("e", taken[0]))
    assert (status, e["spec"]["ports"][0].get("nodePort")) == (201, taken[0]), e


def test_a_pod_requests_what_it_only_limits_and_a_template_does_not(home, namespace) -> None:
    """SetDefaults_Pod: the scheduler and quotas count `limits: {nvidia.com/gpu: 1}` as a
    request; a Deployment's template is left as written."""
    resources = {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m", "nvidia.com/gpu": "1"}}
    wait_for(lambda: home.core.read_namespaced_service_account("default", namespace),
             message="the namespace's default ServiceAccount (ServiceAccount admission)")
    status, pod = call(home, "POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", {
        "metadata": {"name": "limited"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": resources}]}})
    assert status == 201, pod
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "100m", "nvidia.com/gpu": "1"}
    template = {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [
        {"name": "c", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    status, deployment = call(home, "POST", f"/apis/apps/v1/namespaces/{namespace}/deployments"
                              "?dryRun=All", {"metadata": {"name": "d"}, "spec": {
                                  "selector": {"matchLabels": {"app": "d"}},
                                  "template": template}})
    assert status == 201, deployment
    assert "requests" not in deployment["spec"]["template"]["spec"]["containers"][0]["resources"]


@pytest.mark.parametrize(("resources", "complaint"), [
    ({"requests": {"nvidia.com/gpu": "1"}},
     'spec.containers[0].resources.limits: Required value: Limit must be set for non '
     'overcommitable resources'),
    ({"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}},
     'spec.containers[0].resources.requests: Invalid value: "1": must be equal to '
     'nvidia.com/gpu limit'),  # "... limit of 2" since 1.25
    # (how the value reads varies between versions)
    ({"limits": {"nvidia.com/gpu": "500m"}},
     "spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "),
    ({"limits": {"nvidia.com/gpu": "500m"}}, "must be an integer"),
])
def test_extended_resources_are_whole_and_never_overcommitted(home, namespace, resources,
                                                              complaint) -> None:
    wait_for(lambda: home.core.read_namespaced_service_account("default", namespace),
             message="the namespace's default ServiceAccount (ServiceAccount admission)")
    status, body = call(home, "POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", {
        "metadata": {"name": "gpu"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": resources}]}})
    assert status == 422, body
    assert complaint in body["message"], body["message"]


def test_a_claim_s_data_source_is_kept_in_both_fields_and_a_legacy_one_is_claims_only(
        home, namespace) -> None:
    def created(name: str, **spec: dict) -> dict:
        body = {"metadata": {"name": name}, "spec": {
            "accessModes": ["ReadWriteOnce"], "storageClassName": "",
            "resources": {"requests": {"storage": "1Gi"}}, **spec}}
        status, answer = call(home, "POST", f"/api/v1/namespaces/{namespace}/"
                              "persistentvolumeclaims", body)
        assert status == 201, answer
        return {k: answer["spec"].get(k) for k in ("dataSource", "dataSourceRef")}

    seed = {"apiGroup": None, "kind": "PersistentVolumeClaim", "name": "seed"}
    backup = {"apiGroup": "example.com", "kind": "Backup", "name": "all"}
    assert created("copy", dataSource={"kind": "PersistentVolumeClaim", "name": "seed"}) == {
        "dataSource": seed, "dataSourceRef": seed}
    assert created("legacy", dataSource=backup) == {"dataSource": None, "dataSourceRef": None}
    assert created("any", dataSourceRef=backup) == {"dataSource": backup, "dataSourceRef": backup}


def test_a_service_is_defaulted_for_its_type_and_loses_what_only_its_old_type_used(
        home, namespace) -> None:
    """SetDefaults_Service and the strategy's dropTypeDependentFields, as kube-apiserver does
    them: a controller comparing a Service it wrote with the stored one sees these fields."""
    status, balancer = call(home, "POST", services(namespace), {
        "metadata": {"name": "lb"},
        "spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP",
                 "ports": [{"port": 80, "targetPort": 0}]}})
    assert status == 201, balancer
    spec = balancer["spec"]
    assert (spec["externalTrafficPolicy"], spec["internalTrafficPolicy"],
            spec["allocateLoadBalancerNodePorts"]) == ("Cluster", "Cluster", True)
    assert spec["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 10800}}
    assert spec["ports"][0]["targetPort"] == 80
    # Back to ClusterIP, the client sending what it read: the LoadBalancer's fields go.
    spec.update(type="ClusterIP", sessionAffinity="None")
    for port in spec["ports"]:
        del port["nodePort"]
    status, plain = call(home, "PUT", services(namespace, "lb"), balancer)
    assert status == 200, plain
    assert not {"externalTrafficPolicy", "allocateLoadBalancerNodePorts",
                "sessionAffinityConfig"} & plain["spec"].keys()
    # A ClusterIP Service with external IPs is reached from outside: it has a policy.
    status, external = call(home, "POST", services(namespace), {
        "metadata": {"name": "external"},
        "spec": {"externalIPs": ["192.0.2.7"], "ports": [{"port": 443}]}})
    assert status == 201, external
    assert external["spec"]["externalTrafficPolicy"] == "Cluster"
    assert "allocateLoadBalancerNodePorts" not in external["spec"]
