"""A provider whose offer declares pools is one virtual node per pool, `<node>-<pool>`: each with
its pool's capacity, labels (its node selector's among them) and Lease; a pod bound to one gets a
ShadowPod naming that node's pool; a pool the offer withdraws has its node cordoned, saying why,
and deleted only once no pod is bound to it. The test plays the remote enforcer (it writes the
offer); against kubesim or a real home cluster."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from shared.forge.node import MAX_POD_ANNOTATION, WITHDRAWN_ANNOTATION
from shared.wellknown import POOL_LABEL
from tests.conftest import ClusterHandle
from tests.helpers import wait_for
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
