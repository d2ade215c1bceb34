"""A provider whose offer declares pools is one virtual node per pool, `<node>-<pool>`: each with
its pool's capacity, labels (its node selector's among them) and Lease; a pod bound to one gets a
ShadowPod naming that node's pool; a pool the offer withdraws has its node cordoned, saying why,
and deleted only once no pod is bound to it. Each node has a kubelet API of its own, on a port
its daemonEndpoints give, serving a certificate of that node; a node gone has its port closed.
The test plays the remote enforcer (it writes the offer); against kubesim or a real home
cluster."""

from __future__ import annotations

import socket
import ssl
from typing import Any

from cryptography import x509
from kubernetes import client

from shared.forge.node import MAX_POD_ANNOTATION, WITHDRAWN_ANNOTATION
from shared.wellknown import POOL_LABEL
from tests.conftest import ClusterHandle
from tests.helpers import wait_for
from tests.home_agent.agentproc import kubelet_port
from tests.home_agent.play import bound_pod, extend, node_or_none, pod_gone, shadow_pod
from tests.home_agent.test_virtual_node import publish_offer

SELECTOR = "pools.annex.test/kind"


def _pool(name: str, cpu: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "nodeSelector": {SELECTOR: name},
            "resources": {"cpu": cpu, "pods": "10"},
            "labels": {"topology.kubernetes.io/region": "eu-west", SELECTOR: name}, **extra}


GPU = _pool("gpu", "4", maxPodResources={"cpu": "2"}, architecture="arm64")
GENERAL = _pool("general", "8")


def _lease_renewed(home: ClusterHandle, name: str) -> Any:
    leases = client.CoordinationV1Api(home.api_client)
    try:
        return leases.read_namespaced_lease(name, "kube-node-lease").spec.renew_time
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise


def test_each_pool_is_a_node_with_its_capacity_labels_and_lease(
        home: ClusterHandle, remote: ClusterHandle, start_agent: Any) -> None:
    agent = start_agent()
    publish_offer(remote, agent, {"cpu": "12", "pods": "20"}, {}, pools=[GPU, GENERAL])
    gpu_name, general_name = f"{agent.node_name}-gpu", f"{agent.node_name}-general"
    gpu = wait_for(lambda: node_or_none(home, gpu_name), timeout=30, message="the gpu pool's node")
    general = wait_for(lambda: node_or_none(home, general_name), timeout=30,
                       message="the general pool's node")
    assert (gpu.status.capacity["cpu"], gpu.status.allocatable["cpu"]) == ("4", "4")
    assert general.status.capacity["cpu"] == "8"
    for node, pool in ((gpu, "gpu"), (general, "general")):
        labels = node.metadata.labels
        assert labels[POOL_LABEL] == pool
        assert labels[SELECTOR] == pool, "users target a pool with its selector"
        assert labels["topology.kubernetes.io/region"] == "eu-west"
        assert labels["kubernetes.io/hostname"] == node.metadata.name
        assert labels["liqo.io/remote-cluster-id"] == agent.remote_id
        # The agent's taint; a real node lifecycle controller may add its not-ready one too.
        assert [(t.key, t.effect) for t in node.spec.taints
                if not t.key.startswith("node.kubernetes.io/")] == [
            ("virtual-node.liqo.io/not-allowed", "NoExecute")]
        wait_for(lambda name=node.metadata.name: _lease_renewed(home, name), timeout=30,
                 message=f"{node.metadata.name}'s Lease")
    assert gpu.metadata.annotations[MAX_POD_ANNOTATION] == '{"cpu": "2"}'
    assert MAX_POD_ANNOTATION not in (general.metadata.annotations or {})
    assert gpu.metadata.labels["kubernetes.io/arch"] == "arm64"
    # Made before the offer told of pools, the provider's one node had no pod: it is gone.
    wait_for(lambda: node_or_none(home, agent.node_name) is None, timeout=30,
             message="no node for the provider as a whole")


def test_a_withdrawn_pools_node_is_cordoned_and_goes_once_its_pods_are_gone(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_agent: Any) -> None:
    agent = start_agent()
    publish_offer(remote, agent, {"cpu": "12", "pods": "20"}, {}, pools=[GPU, GENERAL])
    gpu_name = f"{agent.node_name}-gpu"
    wait_for(lambda: node_or_none(home, gpu_name), timeout=30, message="the gpu pool's node")
    twin = extend(home, remote, agent, namespace)
    bound_pod(home, namespace, "trainer", gpu_name)
    shadow = wait_for(lambda: shadow_pod(remote, twin, "trainer"), timeout=30,
                      message="the pod's ShadowPod")
    assert shadow["spec"]["pool"] == "gpu", "the pool of the node the pod is bound to"

    publish_offer(remote, agent, {"cpu": "8", "pods": "10"}, {}, pools=[GENERAL])
    cordoned = wait_for(lambda: (node := node_or_none(home, gpu_name)).spec.unschedulable and node,
                        timeout=30, message="the withdrawn pool's node cordoned")
    assert "no longer offers pool gpu" in cordoned.metadata.annotations[WITHDRAWN_ANNOTATION]
    events = home.core.list_namespaced_event(
        "default", field_selector=f"involvedObject.name={gpu_name}").items
    assert any(e.reason == "PoolWithdrawn" for e in events), [e.reason for e in events]
    # The agent keeps it alive (its Lease renewed since the cordon) while the pod is bound.
    since = wait_for(lambda: _lease_renewed(home, gpu_name), timeout=30,
                     message="the cordoned node's Lease")
    wait_for(lambda: _lease_renewed(home, gpu_name) > since, timeout=30,
             message="the cordoned node's Lease renewed")
    assert node_or_none(home, gpu_name) is not None, "never deleted under a bound pod"

    home.core.delete_namespaced_pod("trainer", namespace)
    wait_for(lambda: pod_gone(home, namespace, "trainer"), timeout=60, message="the pod gone")
    wait_for(lambda: node_or_none(home, gpu_name) is None, timeout=30,
             message="the withdrawn pool's node deleted")
    assert node_or_none(home, f"{agent.node_name}-general") is not None


def _advertised_port(home: ClusterHandle, name: str) -> int:
    node = node_or_none(home, name)
    return int(node.status.daemon_endpoints.kubelet_endpoint.port) if node is not None else 0


def _served_names(port: int) -> list[str] | None:
    """The DNS names of the serving certificate at `port` (the agent runs here), None when
    nothing listens there."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                context.wrap_socket(raw) as tls:
            der = tls.getpeercert(binary_form=True)
    except ConnectionRefusedError:
        return None
    assert der is not None
    names = x509.load_der_x509_certificate(der).extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value
    return list(names.get_values_for_type(x509.DNSName))


def test_each_pools_node_has_a_kubelet_api_of_its_own_closed_once_the_node_is_gone(
        home: ClusterHandle, remote: ClusterHandle, start_agent: Any) -> None:
    agent = start_agent()
    first = kubelet_port(agent.home_id, agent.remote_id)
    assert wait_for(lambda: _advertised_port(home, agent.node_name), timeout=30,
                    message="the provider's one node") == first
    publish_offer(remote, agent, {"cpu": "12", "pods": "20"}, {}, pools=[GPU, GENERAL])
    names = [f"{agent.node_name}-{pool}" for pool in ("general", "gpu")]
    ports = [wait_for(lambda name=name: _advertised_port(home, name), timeout=30,
                      message=f"{name} advertises its port") for name in names]
    assert len({first, *ports}) == 3, "a port of its own for every node"
    assert all(port > first for port in ports), "the next free ports: the first one is taken"
    for name, port in zip(names, ports, strict=True):
        assert _served_names(port) == [name], "its own serving certificate"

    wait_for(lambda: node_or_none(home, agent.node_name) is None, timeout=30,
             message="no node for the provider as a whole")
    wait_for(lambda: _served_names(first) is None, timeout=30,
             message="the kubelet API of the node gone closed")
    publish_offer(remote, agent, {"cpu": "8", "pods": "10"}, {}, pools=[GENERAL])
    wait_for(lambda: node_or_none(home, names[1]) is None, timeout=30,
             message="the withdrawn pool's node deleted")
    wait_for(lambda: _served_names(ports[1]) is None, timeout=30,
             message="the kubelet API of the withdrawn pool's node closed")
    assert _served_names(ports[0]) == [names[0]]
    assert _advertised_port(home, names[0]) == ports[0], "a node keeps its port"
