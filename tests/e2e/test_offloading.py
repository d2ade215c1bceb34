"""End to end: a namespace offloaded with strategy Remote, pods scheduled onto the virtual node
by the home scheduler, run by the remote enforcer, their status back at home; updates, scale
down, back-off, quota, the offer, and unoffloading.

The pods are what a 3-replica Deployment's ReplicaSet creates, with the toleration and node
affinity the Remote strategy adds (kubesim has no Deployment controller; the webhook has its
own tests)."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.conftest import ClusterHandle
from tests.e2e.conftest import remapped_cidr, remote_pod_cidr
from tests.helpers import wait_for
from tests.home_agent.conftest import RunningAgent
from tests.home_agent.play import (
    custom,
    namespace_offloading,
    offload_namespace,
    pod_gone,
    read_pod,
    shadow_pod_exists,
)
from tests.remote_enforcer.conftest import PROVIDER_ID

REMOTE_STRATEGY = {
    "tolerations": [{"key": "virtual-node.liqo.io/not-allowed", "operator": "Exists",
                     "effect": "NoExecute"}],
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "liqo.io/type", "operator": "In", "values": ["virtual-node"]}]}]}}},
}


def offloaded(home: ClusterHandle, namespace: str, **spec: Any) -> str:
    offload_namespace(home, namespace, podOffloadingStrategy="Remote", **spec)
    status = wait_for(lambda: (s := namespace_offloading(home, namespace).get("status") or {})
                      .get("offloadingPhase") == "Ready" and s, timeout=60,
                      message="namespace offloaded (twin namespace accepted by the enforcer)")
    return str(status["remoteNamespaceName"])


def replica(home: ClusterHandle, namespace: str, name: str, image: str = "nginx:1.25",
            resources: dict[str, Any] | None = None) -> None:
    container: dict[str, Any] = {"name": "web", "image": image}
    if resources:
        container["resources"] = resources
    home.core.create_namespaced_pod(namespace, {
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [container], **REMOTE_STRATEGY}})


def remote_pod(remote: ClusterHandle, namespace: str, name: str) -> Any:
    return remote.core.read_namespaced_pod(name, namespace)


def home_ready(home: ClusterHandle, namespace: str, name: str) -> dict[str, Any] | None:
    status = read_pod(home, namespace, name).get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or [])
    return status if status.get("phase") == "Running" and ready else None


def test_replicas_run_remotely_and_report_home(home: ClusterHandle, remote: ClusterHandle,
                                               namespace: str, peered: RunningAgent) -> None:
    twin = offloaded(home, namespace)
    names = [f"web-{i}" for i in range(3)]
    for name in names:
        replica(home, namespace, name)
    for name in names:
        pod = wait_for(lambda name=name: read_pod(home, namespace, name)["spec"].get("nodeName"),
                       timeout=60, message=f"{name} scheduled")
        assert pod == peered.node_name
        wait_for(lambda name=name: remote_pod(remote, twin, name).status.phase == "Running",
                 timeout=60, message=f"remote {name} Running")
        status = wait_for(lambda name=name: home_ready(home, namespace, name), timeout=60,
                          message=f"home {name} Running and Ready")
        assert status["hostIP"] == "192.0.2.10"
        cidr = remote_pod_cidr(remote)
        if cidr:
            assert ipaddress.ip_address(status["podIP"]) in ipaddress.ip_network(
                remapped_cidr(cidr))

    # An image update reaches the remote pod.
    home.core.patch_namespaced_pod("web-0", namespace, {
        "spec": {"containers": [{"name": "web", "image": "nginx:1.26"}]}})
    wait_for(lambda: remote_pod(remote, twin, "web-0").spec.containers[0].image == "nginx:1.26",
             timeout=60, message="image rolled through to the remote pod")

    # Scale to 1: the other remote pods go, and the home pods are released.
    for name in names[1:]:
        home.core.delete_namespaced_pod(name, namespace)
    for name in names[1:]:
        wait_for(lambda name=name: not shadow_pod_exists(remote, twin, name), timeout=60,
                 message=f"ShadowPod {name} gone")
        wait_for(lambda name=name: _remote_pod_gone(remote, twin, name), timeout=60,
                 message=f"remote pod {name} gone")
        wait_for(lambda name=name: pod_gone(home, namespace, name), timeout=60,
                 message=f"home pod {name} released")
    assert home_ready(home, namespace, "web-0")


def _remote_pod_gone(remote: ClusterHandle, namespace: str, name: str) -> bool:
    try:
        remote_pod(remote, namespace, name)
    except ApiException as error:
        return error.status == 404
    return False


def test_a_pod_forced_onto_the_node_without_offloading_backs_off(
        home: ClusterHandle, namespace: str, peered: RunningAgent) -> None:
    # Forced: bound by hand, tolerating the taint (else the NoExecute taint evicts it).
    home.core.create_namespaced_pod(namespace, {
        "metadata": {"name": "stray"},
        "spec": {"nodeName": peered.node_name, "tolerations": REMOTE_STRATEGY["tolerations"],
                 "containers": [{"name": "web", "image": "nginx:1.25"}]}})
    wait_for(lambda: (read_pod(home, namespace, "stray").get("status") or {}).get("reason")
             == "OffloadingBackOff", timeout=60, message="Pending/OffloadingBackOff")
    assert read_pod(home, namespace, "stray")["status"]["phase"] == "Pending"


def test_a_consumer_over_quota_sees_why(home: ClusterHandle, remote: ClusterHandle,
                                        namespace: str, peered: RunningAgent) -> None:
    custom(remote).create_namespaced_custom_object(
        "offloading.liqo.io", "v1beta1", peered.tenant_namespace, "quotas", {
            "apiVersion": "offloading.liqo.io/v1beta1", "kind": "Quota",
            "metadata": {"name": "limits"},
            "spec": {"consumerClusterId": peered.home_id, "limitsEnforcement": "Soft",
                     "resources": {"cpu": "1", "memory": "1Gi"}}})
    offloaded(home, namespace)
    replica(home, namespace, "big", resources={"requests": {"cpu": "2", "memory": "128Mi"}})

    def refused() -> dict[str, Any] | None:
        status = read_pod(home, namespace, "big").get("status") or {}
        return next((c for c in status.get("conditions") or []
                     if c.get("type") == "RemoteCreationFailed"), None)

    condition = wait_for(refused, timeout=60, message="RemoteCreationFailed on the home pod")
    assert "cpu" in condition["message"]
    events = wait_for(lambda: [e for e in home.core.list_namespaced_event(namespace).items
                               if e.involved_object.name == "big"
                               and e.reason == "RemoteCreationFailed"], timeout=60,
                      message="RemoteCreationFailed Event")
    assert events[0].type == "Warning"


def test_the_node_capacity_follows_a_shrinking_offer(home: ClusterHandle, remote: ClusterHandle,
                                                     peered: RunningAgent) -> None:
    from shared.quantity import parse_quantity

    def cpu() -> Any:
        capacity = home.core.read_node(peered.node_name).status.capacity or {}
        return parse_quantity(capacity["cpu"]) if "cpu" in capacity else None

    before = wait_for(cpu, timeout=60, message="node capacity from the offer")
    busy = f"busy-{peered.home_id}"
    remote.core.create_namespace({"metadata": {"name": busy}})
    try:
        # The provider's own workload takes 1 cpu: the offer (a share of what is free) shrinks.
        remote.core.create_namespaced_pod(busy, {
            "metadata": {"name": "local-workload"},
            "spec": {"containers": [{"name": "main", "image": "busybox",
                                     "resources": {"requests": {"cpu": "1"}}}]}})
        wait_for(lambda: (c := cpu()) is not None and c < before, timeout=60,
                 message="node capacity shrank with the offer")
    finally:
        remote.core.delete_namespace(busy)


def test_unoffloading_removes_the_twin_namespace(home: ClusterHandle, remote: ClusterHandle,
                                                 namespace: str, peered: RunningAgent) -> None:
    twin = offloaded(home, namespace)
    assert remote.core.read_namespace(twin).metadata.labels[
        "offloading.liqo.io/destination"] == PROVIDER_ID
    custom(home).delete_namespaced_custom_object(
        "offloading.liqo.io", "v1beta1", namespace, "namespaceoffloadings", "offloading")

    def twin_gone() -> bool:
        try:
            remote.core.read_namespace(twin)
        except ApiException as error:
            return error.status == 404
        return False

    wait_for(twin_gone, timeout=90, message="twin namespace deleted")

    def released() -> bool:
        try:
            namespace_offloading(home, namespace)
        except ApiException as error:
            return error.status == 404
        return False

    wait_for(released, timeout=60, message="NamespaceOffloading released")


@pytest.mark.kubesim_only  # the home API server must reach the agent's webhook on loopback
def test_plain_pods_of_a_remote_namespace_are_steered_by_the_webhook(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, enforcer: Any,
        start_agent: Any, tmp_path: Path) -> None:
    from kubernetes import client

    from tests.home_agent.webhook import mutating_webhook_configuration, webhook_serving

    serving = webhook_serving(tmp_path)
    agent = start_agent(*serving.flags, remote_id=PROVIDER_ID)
    registrations = client.AdmissionregistrationV1Api(home.api_client)
    name = f"annex-e2e-{namespace}"
    registrations.create_mutating_webhook_configuration(
        mutating_webhook_configuration(name, serving, namespace))
    try:
        twin = offloaded(home, namespace)
        wait_for(lambda: home.core.read_namespace(namespace).metadata.labels.get(
            "liqo.io/scheduling-enabled") == "true", timeout=30, message="namespace labelled")
        home.core.create_namespaced_pod(namespace, {  # no toleration, no affinity
            "metadata": {"name": "plain"},
            "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}})
        wait_for(lambda: read_pod(home, namespace, "plain")["spec"].get("nodeName")
                 == agent.node_name, timeout=60, message="scheduled onto the virtual node")
        wait_for(lambda: remote_pod(remote, twin, "plain").status.phase == "Running",
                 timeout=60, message="running remotely")
        wait_for(lambda: home_ready(home, namespace, "plain"), timeout=60,
                 message="Running and Ready at home")
    finally:
        registrations.delete_mutating_webhook_configuration(name)
