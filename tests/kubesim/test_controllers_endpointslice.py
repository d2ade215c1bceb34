"""EndpointSlices for Services with selectors (also on real clusters, except readiness hooks)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from tests.helpers import wait_for
from tests.kubesim.test_controllers_cluster import pod_manifest, running

MANAGED_BY = "endpointslice.kubernetes.io/managed-by"


def slices(home: Any, namespace: str, service: str) -> list[Any]:
    discovery = client.DiscoveryV1Api(home.api_client)
    return discovery.list_namespaced_endpoint_slice(
        namespace, label_selector=f"kubernetes.io/service-name={service}").items


def create_service(home: Any, namespace: str) -> None:
    home.core.create_namespaced_service(namespace, {
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"},
                 "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}})


def web_pod(name: str) -> dict[str, Any]:
    manifest = pod_manifest(name, container={"ports": [{"name": "http",
                                                        "containerPort": 8080}]})
    manifest["metadata"]["labels"] = {"app": "web"}
    return manifest


def endpoints(home: Any, namespace: str) -> dict[str, Any]:
    return {e.target_ref.name: e for s in slices(home, namespace, "web")
            for e in s.endpoints or [] if e.target_ref is not None}


def test_service_gets_a_managed_slice_of_its_ready_pods(home, namespace) -> None:
    create_service(home, namespace)
    for name in ("a", "b"):
        home.core.create_namespaced_pod(namespace, web_pod(name))
    for name in ("a", "b"):
        wait_for(lambda n=name: running(home, namespace, n), timeout=60)
    found = wait_for(lambda: (lambda e: e if len(e) == 2 and all(
        x.conditions.ready for x in e.values()) else None)(endpoints(home, namespace)),
        timeout=60)
    [endpoint_slice] = slices(home, namespace, "web")
    assert endpoint_slice.metadata.labels[MANAGED_BY] == "endpointslice-controller.k8s.io"
    assert endpoint_slice.address_type == "IPv4"
    assert [(p.name, p.port) for p in endpoint_slice.ports] == [("http", 8080)]
    owner = endpoint_slice.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.controller) == ("Service", "web", True)
    pod_ip = home.core.read_namespaced_pod("a", namespace).status.pod_ip
    assert found["a"].addresses == [pod_ip]
    assert found["a"].conditions.serving and not found["a"].conditions.terminating


def test_unmanaged_slices_are_left_alone(home, namespace) -> None:
    create_service(home, namespace)
    discovery = client.DiscoveryV1Api(home.api_client)
    discovery.create_namespaced_endpoint_slice(namespace, {
        "metadata": {"name": "web-extra", "labels": {"kubernetes.io/service-name": "web",
                                                     MANAGED_BY: "someone-else"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["192.0.2.10"]}]})
    home.core.create_namespaced_pod(namespace, web_pod("a"))
    wait_for(lambda: "a" in endpoints(home, namespace), timeout=60)
    extra = discovery.read_namespaced_endpoint_slice("web-extra", namespace)
    assert extra.endpoints[0].addresses == ["192.0.2.10"]
    assert extra.metadata.labels[MANAGED_BY] == "someone-else"


@pytest.mark.kubesim_only(reason="makes a running pod unready (kubelet.set_ready)")
def test_unready_and_deleted_pods_change_their_conditions(home, namespace) -> None:
    create_service(home, namespace)
    home.core.create_namespaced_pod(namespace, web_pod("a"))
    wait_for(lambda: running(home, namespace, "a"))
    home.sim.controllers.kubelet.set_ready(namespace, "a", False)
    wait_for(lambda: (e := endpoints(home, namespace).get("a")) is not None
             and not e.conditions.ready and not e.conditions.serving)
    home.core.delete_namespaced_pod("a", namespace)
    wait_for(lambda: "a" not in endpoints(home, namespace))


def test_a_service_that_stops_selecting_keeps_its_slices(home, namespace) -> None:
    # pkg/controller/endpointslice: a Service without a selector gets no slices from the
    # controller, and the ones it made are neither updated nor deleted.
    create_service(home, namespace)
    home.core.create_namespaced_pod(namespace, web_pod("a"))
    wait_for(lambda: "a" in endpoints(home, namespace), timeout=60)
    home.core.patch_namespaced_service("web", namespace, {"spec": {"selector": None}})
    # a second Service selecting the same pod: once its slice exists, the controller has
    # worked through the change of the first one
    home.core.create_namespaced_service(namespace, {
        "metadata": {"name": "barrier"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 81}]}})
    wait_for(lambda: slices(home, namespace, "barrier"), timeout=60)
    assert set(endpoints(home, namespace)) == {"a"}
