"""The virtual node: created from the flags and the ResourceOffer, labelled and tainted, its
Lease renewed, Ready following the remote API server's health."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from tests.conftest import ClusterHandle
from tests.helpers import wait_for
from tests.home_agent.conftest import RunningAgent

OFFERS = ("sharing.liqo.io", "v1alpha1", "resourceoffers")


def custom(handle: ClusterHandle) -> Any:
    from kubernetes import client

    return client.CustomObjectsApi(handle.api_client)


def publish_offer(remote: ClusterHandle, agent: RunningAgent, resources: dict[str, str],
                  labels: dict[str, str], **spec: Any) -> None:
    """What the remote enforcer publishes in the tenant namespace."""
    group, version, plural = OFFERS
    body = {"apiVersion": f"{group}/{version}", "kind": "ResourceOffer",
            "metadata": {"name": agent.home_id, "namespace": agent.tenant_namespace},
            "spec": {"clusterId": agent.remote_id, "consumerClusterId": agent.home_id,
                     "resources": resources, "labels": labels, **spec}}
    api = custom(remote)
    try:
        current = api.get_namespaced_custom_object(group, version, agent.tenant_namespace,
                                                   plural, agent.home_id)
    except Exception:  # noqa: BLE001 - not there yet
        api.create_namespaced_custom_object(group, version, agent.tenant_namespace, plural, body)
        return
    body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    api.replace_namespaced_custom_object(group, version, agent.tenant_namespace, plural,
                                         agent.home_id, body)


def node(home: ClusterHandle, name: str) -> Any:
    return home.core.read_node(name)


def ready(node_obj: Any) -> Any:
    return next(c for c in node_obj.status.conditions if c.type == "Ready")


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_the_virtual_node_shows_the_offer(home: ClusterHandle, remote: ClusterHandle,
                                          start_agent: Any) -> None:
    agent = start_agent()
    publish_offer(remote, agent, {"cpu": "8", "memory": "16Gi", "pods": "110"},
                  {"topology.kubernetes.io/region": "eu-west"})

    def shows_offer() -> Any:
        found = node(home, agent.node_name)
        return found if found.status.capacity.get("cpu") == "8" else None

    found = wait_for(shows_offer, timeout=30, message="node with the offer's capacity")
    labels = found.metadata.labels
    assert labels["liqo.io/type"] == "virtual-node"
    assert labels["liqo.io/remote-cluster-id"] == agent.remote_id
    assert labels["kubernetes.io/hostname"] == agent.node_name
    assert labels["kubernetes.io/os"] == "linux"
    assert labels["topology.kubernetes.io/region"] == "eu-west"
    assert found.status.allocatable["memory"] == "16Gi"
    assert [(t.key, t.value, t.effect) for t in found.spec.taints
            if t.key.startswith("virtual-node")] == [
        ("virtual-node.liqo.io/not-allowed", "true", "NoExecute")]
    # The port the agent's kubelet API listens on (each test agent gets a free one),
    # at the node's only address: an anonymous request is a kubelet's 401 there.
    port = found.status.daemon_endpoints.kubelet_endpoint.port
    assert [(a.type, a.address) for a in found.status.addresses] == [("InternalIP", "127.0.0.1")]
    answer = requests.get(f"https://127.0.0.1:{port}/healthz", verify=False, timeout=10)
    assert (answer.status_code, answer.text) == (401, "Unauthorized\n")
    assert not found.metadata.finalizers
    assert not any(k.startswith("kopf") for k in (found.metadata.annotations or {}))


def test_the_node_has_the_architecture_and_kubelet_version_the_offer_tells(
        home: ClusterHandle, remote: ClusterHandle, start_agent: Any) -> None:
    agent = start_agent()
    publish_offer(remote, agent, {"cpu": "8", "pods": "110"}, {},
                  architecture="arm64", kubeletVersion="v1.29.4")
    found = wait_for(lambda: (n := node(home, agent.node_name)).status.node_info.architecture
                     == "arm64" and n, timeout=30, message="the node with the offer's platform")
    assert found.metadata.labels["kubernetes.io/arch"] == "arm64"
    assert found.status.node_info.kubelet_version == "v1.29.4"
    assert found.status.node_info.operating_system == "linux"


def test_the_node_follows_the_offer(home: ClusterHandle, remote: ClusterHandle,
                                    start_agent: Any) -> None:
    agent = start_agent()
    publish_offer(remote, agent, {"cpu": "8", "pods": "110"}, {"liqo.io/provider": "acme"})
    wait_for(lambda: node(home, agent.node_name).metadata.labels.get("liqo.io/provider"),
             timeout=30, message="offer label on the node")
    publish_offer(remote, agent, {"cpu": "2", "pods": "10"}, {})

    def shrunk() -> bool:
        found = node(home, agent.node_name)
        return (found.status.capacity.get("cpu") == "2"
                and "liqo.io/provider" not in found.metadata.labels)

    wait_for(shrunk, timeout=30, message="capacity and labels follow the offer")


def test_the_lease_is_renewed(home: ClusterHandle, start_agent: Any) -> None:
    from kubernetes import client

    agent = start_agent()
    leases = client.CoordinationV1Api(home.api_client)
    first = wait_for(lambda: leases.read_namespaced_lease(agent.node_name, "kube-node-lease"),
                     timeout=30, message="node lease")
    assert first.spec.holder_identity == agent.node_name
    assert first.spec.lease_duration_seconds == 40
    assert first.metadata.owner_references[0].name == agent.node_name
    wait_for(lambda: leases.read_namespaced_lease(agent.node_name, "kube-node-lease")
             .spec.renew_time > first.spec.renew_time, timeout=15, message="lease renewed")


def test_the_node_is_ready_when_the_remote_answers(home: ClusterHandle,
                                                   start_agent: Any) -> None:
    agent = start_agent()
    wait_for(lambda: ready(node(home, agent.node_name)).status == "True", timeout=30,
             message="node Ready")


def test_a_virtual_node_resource_configures_the_node_live(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_agent: Any) -> None:
    agent = start_agent()
    publish_offer(remote, agent, {"cpu": "8", "pods": "110"}, {})
    api = custom(home)
    vn = ("offloading.liqo.io", "v1beta1", namespace, "virtualnodes")
    api.create_namespaced_custom_object(*vn, {
        "apiVersion": "offloading.liqo.io/v1beta1", "kind": "VirtualNode",
        "metadata": {"name": "remote", "namespace": namespace},
        "spec": {"clusterId": agent.remote_id, "labels": {"team": "blue"},
                 "taints": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}],
                 "resources": {"cpu": "3", "pods": "7"}}})

    def configured() -> bool:
        found = node(home, agent.node_name)
        return (found.metadata.labels.get("team") == "blue"
                and found.status.capacity.get("cpu") == "3"
                and any(t.key == "dedicated" for t in found.spec.taints))

    wait_for(configured, timeout=30, message="VirtualNode labels, taints and capacity applied")
    wait_for(lambda: (api.get_namespaced_custom_object(*vn, "remote").get("status") or {})
             .get("nodeName") == agent.node_name, timeout=30, message="VirtualNode status")

    api.patch_namespaced_custom_object(*vn, "remote", {"spec": {"labels": None, "taints": None,
                                                                "resources": None}})

    def back_to_the_offer() -> bool:
        found = node(home, agent.node_name)
        return ("team" not in found.metadata.labels
                and found.status.capacity.get("cpu") == "8"
                and not any(t.key == "dedicated" for t in found.spec.taints))

    wait_for(back_to_the_offer, timeout=30, message="removed settings removed from the node")
