"""End to end: Service, EndpointSlice and Ingress reflection, with
the remote enforcer and the home agent as real processes.

A Service whose pods run both at home and remotely must be served in both clusters: at home the
standard EndpointSlice controller sees every pod (the offloaded ones through the virtual node);
remotely its own controller sees the offloaded pods, and the agent adds the home pods' endpoints
(remapped) in slices of its own, never a second copy of a remote pod.

The provider's enforcer reviews what the consumer exposes (closed by default): these tests open
the consumer's Quota servicePolicy as a provider admin does (NodePort Services, the CIDRs home
pods are reached through, the remote default IngressClass and the tests' host); a reflection the
policy refuses shows at home as a FailedReflection Event naming the rule."""

from __future__ import annotations

import ipaddress
import os
import random
from collections import Counter
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from shared.ipremap import CidrRemap, remap_address
from shared.wellknown import ENDPOINTSLICE_MANAGED_BY_LABEL, ORIGIN_CLUSTER_LABEL
from tests.conftest import ClusterHandle
from tests.e2e.conftest import Peer
from tests.e2e.test_offloading import WEB, offloaded, replica, running_and_ready
from tests.helpers import wait_for
from tests.home_agent.play import read_pod

OURS = "endpointslice.reflection.liqo.io"
DEFAULT_INGRESS_CLASS = "ingressclass.kubernetes.io/is-default-class"
SKIP = {"liqo.io/skip-reflection": "true"}
ALLOW = {"liqo.io/allow-reflection": "true"}
KEPT_HOME = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [
        {"key": "liqo.io/type", "operator": "NotIn", "values": ["virtual-node"]}]}]}}}}


def home_pod_remap(home: ClusterHandle) -> CidrRemap | None:
    """Where the remote reaches home pods in these tests (the fabric's job; the agent only
    rewrites): a range of the home pod CIDR's size, when that CIDR is known."""
    cidr = os.environ.get("E2E_HOME_POD_CIDR") or (
        str(home.sim.pod_cidr) if home.sim is not None else None)
    if cidr is None:
        return None
    network = ipaddress.ip_network(cidr)
    base = "198.18.0.0" if network.version == 4 else "fd00:b::"
    return CidrRemap(cidr, str(ipaddress.ip_network(f"{base}/{network.prefixlen}",
                                                    strict=False)))


def home_endpoint_cidrs(home: ClusterHandle) -> list[str]:
    """Where the provider reaches home pods: their CIDR and its remapped range when known, else
    anywhere (what a provider not knowing the consumer's network would have to allow)."""
    remap = home_pod_remap(home)
    return [remap.source, remap.target] if remap is not None else ["0.0.0.0/0", "::/0"]


def exposing(home: ClusterHandle, **more: Any) -> dict[str, Any]:
    """The servicePolicy these tests' consumer gets from the provider."""
    return {"allowedServiceTypes": ["ClusterIP", "NodePort"],
            "allowedEndpointCIDRs": home_endpoint_cidrs(home), **more}


def peer_exposing(peer: Peer, home: ClusterHandle, *flags: str, **more: Any) -> None:
    peer(*flags, service_policy=exposing(home, **more))


def peer_remapping_home(peer: Peer, home: ClusterHandle, *flags: str) -> CidrRemap | None:
    remap = home_pod_remap(home)
    if remap is not None:
        flags = ("--home-pod-cidr", remap.source, "--remapped-home-pod-cidr", remap.target, *flags)
    peer_exposing(peer, home, *flags)
    return remap


def stray_address(remap: CidrRemap | None) -> str:
    """An address the consumer may point at that no pod holds (a hand edit's)."""
    if remap is None:
        return "192.0.2.99"
    return str(ipaddress.ip_network(remap.target)[99])


def discovery(cluster: ClusterHandle) -> client.DiscoveryV1Api:
    return client.DiscoveryV1Api(cluster.api_client)


def networking(cluster: ClusterHandle) -> client.NetworkingV1Api:
    return client.NetworkingV1Api(cluster.api_client)


def create_service(home: ClusterHandle, namespace: str, name: str = "web",
                   annotations: dict[str, str] | None = None, **spec: Any) -> None:
    home.core.create_namespaced_service(namespace, {
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"selector": WEB, "ports": [{"name": "http", "port": 80}], **spec}})


def home_web_pod(home: ClusterHandle, namespace: str, name: str) -> None:
    """A web pod kept at home by its affinity."""
    home.core.create_namespaced_pod(namespace, {
        "metadata": {"name": name, "labels": WEB},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}], **KEPT_HOME}})


def read_service(cluster: ClusterHandle, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        service = cluster.core.read_namespaced_service(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    return cluster.api_client.sanitize_for_serialization(service)  # type: ignore[no-any-return]


def slices(cluster: ClusterHandle, namespace: str, service: str) -> list[dict[str, Any]]:
    listed = discovery(cluster).list_namespaced_endpoint_slice(
        namespace, label_selector=f"kubernetes.io/service-name={service}")
    return [cluster.api_client.sanitize_for_serialization(s) for s in listed.items]


def managed_by_us(endpoint_slice: dict[str, Any]) -> bool:
    return bool(endpoint_slice["metadata"]["labels"].get(ENDPOINTSLICE_MANAGED_BY_LABEL) == OURS)


def our_slices(remote: ClusterHandle, twin: str, service: str) -> list[dict[str, Any]]:
    return [s for s in slices(remote, twin, service) if managed_by_us(s)]


def endpoints_by_pod(endpoint_slices: list[dict[str, Any]]) -> Counter[tuple[str, str, str]]:
    """(pod name, targetRef kind, address) of every endpoint, counted."""
    return Counter((e["targetRef"]["name"], e["targetRef"]["kind"], address)
                   for s in endpoint_slices for e in s.get("endpoints") or []
                   for address in e["addresses"])


def pod_ip(cluster: ClusterHandle, namespace: str, name: str) -> str | None:
    pod = read_pod(cluster, namespace, name)
    return str(pod["status"]["podIP"]) if running_and_ready(pod) else None


def test_a_service_spread_over_both_clusters_has_every_endpoint_once_on_each_side(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    remap = peer_remapping_home(peer, home)
    twin = offloaded(home, namespace)
    create_service(home, namespace)
    home_web_pod(home, namespace, "web-home")
    replica(home, namespace, "web-away")  # onto the virtual node
    home_ip = wait_for(lambda: pod_ip(home, namespace, "web-home"), timeout=60,
                       message="the home pod Running and Ready")
    away_home_ip = wait_for(lambda: pod_ip(home, namespace, "web-away"), timeout=60,
                            message="the offloaded pod Running and Ready (status reflected)")
    away_remote_ip = wait_for(lambda: pod_ip(remote, twin, "web-away"), timeout=60,
                              message="the remote pod Running and Ready")

    # Home: the standard controller sees both pods, the offloaded one at its home address.
    wait_for(lambda: endpoints_by_pod(slices(home, namespace, "web")) == Counter({
        ("web-home", "Pod", home_ip): 1, ("web-away", "Pod", away_home_ip): 1}), timeout=60,
        message="the home slices hold both pods")

    # Remote: the remote controller's slice has the remote pod, ours the home pod, remapped.
    remapped = remap_address(home_ip, remap)
    wanted = Counter({("web-home", "RemotePod", remapped): 1,
                      ("web-away", "Pod", away_remote_ip): 1})
    wait_for(lambda: endpoints_by_pod(slices(remote, twin, "web")) == wanted, timeout=60,
             message="the remote slices hold each pod exactly once, the home one remapped")
    assert endpoints_by_pod(our_slices(remote, twin, "web")) == Counter({
        ("web-home", "RemotePod", remapped): 1})
    copied = read_service(remote, twin, "web")
    assert copied is not None and copied["spec"]["selector"] == WEB

    # Our slice is ours to keep: a hand edit is reverted, the remote controller leaves it be.
    ours = our_slices(remote, twin, "web")[0]
    discovery(remote).patch_namespaced_endpoint_slice(
        ours["metadata"]["name"], twin, {"endpoints": [{"addresses": [stray_address(remap)]}]})
    wait_for(lambda: endpoints_by_pod(slices(remote, twin, "web")) == wanted, timeout=30,
             message="the hand-edited slice reverted")

    # A home pod going takes its remote endpoint with it.
    home.core.delete_namespaced_pod("web-home", namespace, grace_period_seconds=0)
    wait_for(lambda: endpoints_by_pod(slices(remote, twin, "web")) == Counter({
        ("web-away", "Pod", away_remote_ip): 1}), timeout=60,
        message="the deleted home pod's endpoint gone remotely")


def test_services_and_their_slices_follow_the_reflection_annotations(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    peer_exposing(peer, home)
    twin = offloaded(home, namespace)
    create_service(home, namespace, "hidden", SKIP)
    create_service(home, namespace, "shown")
    home_web_pod(home, namespace, "web-home")
    wait_for(lambda: our_slices(remote, twin, "shown") and endpoints_by_pod(
        our_slices(remote, twin, "shown")), timeout=60,
        message="the plain Service's slice reflected with the home pod")
    hidden_slices = wait_for(lambda: [s for s in slices(home, namespace, "hidden")
                                      if s.get("endpoints")], timeout=60,
                             message="the skipped Service has its home slice")
    # The skipped Service's objects were handled before the witness's by the same watches.
    assert read_service(remote, twin, "hidden") is None
    assert our_slices(remote, twin, "hidden") == []

    # A slice annotated itself overrides its Service.
    discovery(home).patch_namespaced_endpoint_slice(
        hidden_slices[0]["metadata"]["name"], namespace, {"metadata": {"annotations": ALLOW}})
    wait_for(lambda: our_slices(remote, twin, "hidden"), timeout=30,
             message="the slice annotated allow-reflection reflected despite its Service")
    assert read_service(remote, twin, "hidden") is None

    # Skipping a reflected Service takes it and its (unannotated) slices away.
    home.core.patch_namespaced_service("shown", namespace, {"metadata": {"annotations": SKIP}})
    wait_for(lambda: read_service(remote, twin, "shown") is None
             and our_slices(remote, twin, "shown") == [], timeout=30,
             message="the skipped Service's copy and its slices deleted")


def test_allow_list_services_take_their_slices_along(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    peer_exposing(peer, home, "--service-reflection-type", "AllowList")
    twin = offloaded(home, namespace)
    create_service(home, namespace, "plain")
    create_service(home, namespace, "allowed", ALLOW)
    home_web_pod(home, namespace, "web-home")
    wait_for(lambda: read_service(remote, twin, "allowed") and our_slices(remote, twin, "allowed"),
             timeout=60, message="the allowed Service reflected with its slice")
    wait_for(lambda: slices(home, namespace, "plain"), timeout=30,
             message="the plain Service has its home slice")
    assert read_service(remote, twin, "plain") is None
    assert our_slices(remote, twin, "plain") == []


def test_service_fields_the_remote_allocates_are_left_to_it(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    peer_exposing(peer, home)
    twin = offloaded(home, namespace)
    node_port = random.randint(30000, 32767)
    create_service(home, namespace, "forced", {"liqo.io/force-remote-node-port": "true"},
                   type="NodePort", ports=[{"name": "http", "port": 80, "nodePort": node_port}])
    create_service(home, namespace, "headless", clusterIP="None")
    create_service(home, namespace, "plain")
    forced = wait_for(lambda: read_service(remote, twin, "forced"), timeout=30,
                      message="the NodePort Service reflected")
    assert forced["spec"]["ports"][0]["nodePort"] == node_port
    headless = wait_for(lambda: read_service(remote, twin, "headless"), timeout=30,
                        message="the headless Service reflected")
    assert headless["spec"]["clusterIP"] == "None"
    plain = wait_for(lambda: read_service(remote, twin, "plain"), timeout=30,
                     message="the plain Service reflected")
    assert plain["spec"]["clusterIP"] not in (None, "", "None")  # the remote's own allocation
    assert plain["metadata"]["labels"][ORIGIN_CLUSTER_LABEL]

    # A hand edit is reverted; the remote's allocations are not (they are no drift).
    remote.core.patch_namespaced_service("plain", twin, {"spec": {"selector": {"app": "other"}}})
    wait_for(lambda: (read_service(remote, twin, "plain") or {}).get("spec", {}).get("selector")
             == WEB, timeout=30, message="the hand-edited selector reverted")
    reverted = read_service(remote, twin, "plain")
    assert reverted is not None and reverted["spec"]["clusterIP"] == plain["spec"]["clusterIP"]

    home.core.delete_namespaced_service("plain", namespace)
    wait_for(lambda: read_service(remote, twin, "plain") is None, timeout=30,
             message="the copy deleted with the home Service")


def test_a_node_port_taken_remotely_is_left_for_the_remote_to_choose(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    """The copy goes without its home nodePort, so the remote allocates its own even when the
    home one is taken there (with it, the remote API server would refuse the copy)."""
    peer_exposing(peer, home)
    twin = offloaded(home, namespace)
    # a remote Service of another namespace holds a port; the home Service asks for that port
    blocker = f"{twin}-blocker"
    remote.core.create_namespace({"metadata": {"name": blocker}})
    try:
        held = remote.core.create_namespaced_service(blocker, {
            "metadata": {"name": "holder"},
            "spec": {"type": "NodePort", "ports": [{"port": 80}]}}).spec.ports[0].node_port
        create_service(home, namespace, "web", type="NodePort",
                       ports=[{"name": "http", "port": 80, "nodePort": held}])
        copy = wait_for(lambda: read_service(remote, twin, "web"), timeout=30,
                        message="the NodePort Service reflected")
        node_port = copy["spec"]["ports"][0]["nodePort"]
        assert node_port != held and 30000 <= node_port <= 32767  # the remote's own choice
        original = read_service(home, namespace, "web")
        assert original is not None and original["spec"]["ports"][0]["nodePort"] == held
    finally:
        remote.core.delete_namespace(blocker)


def remote_default_ingress_class(remote: ClusterHandle) -> str:
    """The remote cluster's default IngressClass (on kubesim, one made for the tests): the one a
    reflected Ingress, which names none, gets."""
    classes = networking(remote).list_ingress_class().items
    for ingress_class in classes:
        if (ingress_class.metadata.annotations or {}).get(DEFAULT_INGRESS_CLASS) == "true":
            return str(ingress_class.metadata.name)
    if remote.sim is None:
        pytest.skip("the remote cluster has no default IngressClass for reflected Ingresses")
    networking(remote).create_ingress_class({
        "metadata": {"name": "annex-e2e", "annotations": {DEFAULT_INGRESS_CLASS: "true"}},
        "spec": {"controller": "example.com/ingress"}})
    return "annex-e2e"


def test_an_ingress_is_reflected_without_its_class_and_zero_workers_disable_a_kind(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    peer_exposing(peer, home, "--service-reflection-workers", "0",
                  allowedIngressClasses=[remote_default_ingress_class(remote)],
                  allowedIngressHosts=["web.example"])
    twin = offloaded(home, namespace)
    create_service(home, namespace)
    rules = [{"host": "web.example", "http": {"paths": [{
        "path": "/", "pathType": "Prefix",
        "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]
    networking(home).create_namespaced_ingress(namespace, {
        "metadata": {"name": "web"}, "spec": {"ingressClassName": "home-nginx", "rules": rules}})

    def remote_ingress() -> dict[str, Any] | None:
        try:
            found = networking(remote).read_namespaced_ingress("web", twin)
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return remote.api_client.sanitize_for_serialization(found)  # type: ignore[no-any-return]

    copied = wait_for(remote_ingress, timeout=30, message="the Ingress reflected")
    assert copied["spec"].get("ingressClassName") != "home-nginx"  # the remote default, if any
    assert copied["spec"]["rules"] == rules

    networking(remote).patch_namespaced_ingress("web", twin, {"spec": {"rules": [
        {"host": "web.example", "http": {"paths": [{**rules[0]["http"]["paths"][0],
                                                     "path": "/admin"}]}}]}})
    wait_for(lambda: (remote_ingress() or {}).get("spec", {}).get("rules") == rules, timeout=30,
             message="the hand-edited Ingress reverted")
    # Services are not reflected at all (not even watched); the Ingress shows the agent is live.
    assert read_service(remote, twin, "web") is None

    networking(home).delete_namespaced_ingress("web", namespace)
    wait_for(lambda: remote_ingress() is None, timeout=30,
             message="the copy deleted with the home Ingress")


def test_a_reflection_the_providers_policy_refuses_shows_at_home_naming_the_rule(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    peer()  # the provider's default policy: ClusterIP Services only
    twin = offloaded(home, namespace)
    create_service(home, namespace, "edge", type="LoadBalancer")
    create_service(home, namespace, "plain")

    def refusal() -> str | None:
        return next((e.message for e in home.core.list_namespaced_event(
            namespace, field_selector="involvedObject.name=edge").items
            if e.reason == "FailedReflection" and e.type == "Warning"), None)

    message = wait_for(refusal, timeout=30, message="a FailedReflection Event on the Service")
    assert 'spec.type: Forbidden: type "LoadBalancer" is not allowed for this consumer' in message
    assert "(servicePolicy.allowedServiceTypes: ClusterIP)" in message
    wait_for(lambda: read_service(remote, twin, "plain"), timeout=30,
             message="the ClusterIP Service reflected")
    assert read_service(remote, twin, "edge") is None
