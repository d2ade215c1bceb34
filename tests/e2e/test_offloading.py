"""End to end: a namespace offloaded with strategy Remote, a Deployment's pods scheduled onto the
virtual node by the home scheduler, run by the remote enforcer, their status back at home; image
updates and scale down through the Deployment, back-off, quota, the offer, the remote refusing the
agent, unoffloading, a lent GPU, and a pod no remote node can hold (held at home, saying why).

The Deployment's pod template carries the toleration and node affinity the Remote strategy adds,
so that these tests also pass on real clusters where the home API server cannot reach the agent's
webhook; the webhook-driven path has its own (kubesim-only) test at the end."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.conftest import ClusterHandle
from tests.e2e.conftest import consumer_user, remapped_cidr, remote_pod_cidr
from tests.helpers import wait_for
from tests.home_agent.conftest import RunningAgent
from tests.home_agent.play import (
    custom,
    namespace_offloading,
    offload_namespace,
    read_pod,
)
from tests.remote_enforcer.conftest import PROVIDER_ID

REMOTE_STRATEGY = {
    "tolerations": [{"key": "virtual-node.liqo.io/not-allowed", "operator": "Exists",
                     "effect": "NoExecute"}],
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "liqo.io/type", "operator": "In", "values": ["virtual-node"]}]}]}}},
}
WEB = {"app": "web"}
AGENT_IP = "192.0.2.10"  # the e2e `peered` fixture's --agent-ip


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
        "metadata": {"name": name, "labels": WEB},
        "spec": {"containers": [container], **REMOTE_STRATEGY}})


def apps(home: ClusterHandle) -> client.AppsV1Api:
    return client.AppsV1Api(home.api_client)


def create_web_deployment(home: ClusterHandle, namespace: str, replicas: int,
                          image: str) -> None:
    apps(home).create_namespaced_deployment(namespace, {
        "metadata": {"name": "web"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": WEB},
                 "template": {"metadata": {"labels": WEB},
                              "spec": {"containers": [{"name": "web", "image": image}],
                                       **REMOTE_STRATEGY}}}})


def home_pods(home: ClusterHandle, namespace: str) -> dict[str, dict[str, Any]]:
    """Every web pod at home, terminating ones included (a released pod is gone)."""
    listed = home.core.list_namespaced_pod(namespace, label_selector="app=web")
    return {pod.metadata.name: home.api_client.sanitize_for_serialization(pod)
            for pod in listed.items}


def remote_pods(remote: ClusterHandle, twin: str) -> dict[str, Any]:
    """Every pod in the twin namespace, terminating ones included."""
    return {pod.metadata.name: pod for pod in remote.core.list_namespaced_pod(twin).items}


def shadow_pod_names(remote: ClusterHandle, twin: str) -> set[str]:
    listed = custom(remote).list_namespaced_custom_object(
        "offloading.liqo.io", "v1beta1", twin, "shadowpods")
    return {item["metadata"]["name"] for item in listed["items"]}


def running_and_ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or [])


def home_ready(home: ClusterHandle, namespace: str, name: str) -> dict[str, Any] | None:
    pod = read_pod(home, namespace, name)
    return pod["status"] if running_and_ready(pod) else None


def offloaded_as(home: ClusterHandle, remote: ClusterHandle, namespace: str, twin: str,
                 replicas: int, image: str) -> dict[str, dict[str, Any]]:
    """Wait until the web Deployment has settled at `replicas` pods of `image`, each with its
    ShadowPod and a Running remote pod of that image, nothing else left on either side, the home
    pods Running and Ready and the Deployment available; return the home pods."""
    def settled_at_home() -> set[str] | None:
        pods = home_pods(home, namespace)
        images = {pod["spec"]["containers"][0]["image"] for pod in pods.values()}
        return set(pods) if len(pods) == replicas and images == {image} else None

    names = wait_for(settled_at_home, timeout=60,
                     message=f"exactly {replicas} home pods, all {image}")
    wait_for(lambda: shadow_pod_names(remote, twin) == names, timeout=60,
             message=f"exactly the ShadowPods of {sorted(names)}")

    def remote_running() -> bool:
        pods = remote_pods(remote, twin)
        return set(pods) == names and all(
            pod.status.phase == "Running" and pod.spec.containers[0].image == image
            for pod in pods.values())

    wait_for(remote_running, timeout=60,
             message=f"exactly the remote pods {sorted(names)}, Running {image}")
    pods = wait_for(lambda: (p := home_pods(home, namespace)).keys() == names and all(
        running_and_ready(pod) for pod in p.values()) and p, timeout=60,
        message="home pods Running and Ready")
    wait_for(lambda: (apps(home).read_namespaced_deployment("web", namespace).status
                      .available_replicas or 0) == replicas, timeout=60,
             message=f"Deployment reports {replicas} available replicas")
    return pods


def web_offloaded(home: ClusterHandle, remote: ClusterHandle, namespace: str,
                  replicas: int = 3, image: str = "nginx:1.25") -> tuple[str, dict[str, Any]]:
    twin = offloaded(home, namespace)
    create_web_deployment(home, namespace, replicas, image)
    return twin, offloaded_as(home, remote, namespace, twin, replicas, image)


def test_a_deployments_replicas_run_remotely_and_report_home(
        home: ClusterHandle, remote: ClusterHandle, namespace: str,
        peered: RunningAgent) -> None:
    _, pods = web_offloaded(home, remote, namespace, replicas=3)
    cidr = remote_pod_cidr(remote)
    for pod in pods.values():
        assert pod["spec"]["nodeName"] == peered.node_name
        assert pod["status"]["hostIP"] == AGENT_IP
        if cidr:
            assert ipaddress.ip_address(pod["status"]["podIP"]) in ipaddress.ip_network(
                remapped_cidr(cidr))


def test_an_image_update_of_the_deployment_rolls_through_to_the_remote_pods(
        home: ClusterHandle, remote: ClusterHandle, namespace: str,
        peered: RunningAgent) -> None:
    twin, before = web_offloaded(home, remote, namespace, replicas=3, image="nginx:1.25")
    apps(home).patch_namespaced_deployment("web", namespace, {"spec": {"template": {"spec": {
        "containers": [{"name": "web", "image": "nginx:1.26"}]}}}})
    after = offloaded_as(home, remote, namespace, twin, 3, "nginx:1.26")
    # The new ReplicaSet's pods, not the old ones updated in place.
    assert not set(after) & set(before)
    hashes = {pod["metadata"]["labels"]["pod-template-hash"] for pod in after.values()}
    assert len(hashes) == 1
    assert hashes.isdisjoint(
        pod["metadata"]["labels"]["pod-template-hash"] for pod in before.values())


def test_scaling_the_deployment_down_removes_the_other_remote_pods(
        home: ClusterHandle, remote: ClusterHandle, namespace: str,
        peered: RunningAgent) -> None:
    twin, before = web_offloaded(home, remote, namespace, replicas=3)
    # A patch of spec.replicas: kubesim serves no deployments/scale subresource yet.
    apps(home).patch_namespaced_deployment("web", namespace, {"spec": {"replicas": 1}})
    after = offloaded_as(home, remote, namespace, twin, 1, "nginx:1.25")
    assert set(after) < set(before)


@pytest.mark.kubesim_only(reason="the remote API server refuses the agent's identity alone "
                                 "(faults.refuse), which a real API server cannot be told to do")
def test_the_node_turns_not_ready_while_the_remote_refuses_the_agent(
        home: ClusterHandle, remote: ClusterHandle, peered: RunningAgent) -> None:
    def ready() -> Any:
        node = home.core.read_node(peered.node_name)
        return next(c for c in node.status.conditions or [] if c.type == "Ready")

    wait_for(lambda: ready().status == "True", timeout=30, message="Ready at first")
    remote.sim.faults.refuse(user=consumer_user(peered.home_id))  # the agent alone
    try:
        condition = wait_for(lambda: (c := ready()).status == "False" and c, timeout=30,
                             message="Ready=False after the failure threshold")
        assert condition.reason == "RemoteClusterUnreachable"
        assert PROVIDER_ID in condition.message
    finally:
        remote.sim.faults.restore()
    wait_for(lambda: ready().status == "True", timeout=30, message="Ready again after recovery")


def test_a_pod_forced_onto_the_node_without_offloading_backs_off(
        home: ClusterHandle, namespace: str, peered: RunningAgent) -> None:
    # Bound only once the node exists: the pod garbage collector deletes a pod bound to a node
    # that is missing when its quarantine for that name ends, which on a shared node name may
    # be an earlier test's (on a real cluster as on kubesim).
    wait_for(lambda: home.core.read_node(peered.node_name), timeout=30, message="the node")
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
                     "resources": {"cpu": "10m", "memory": "1Gi"}}})
    offloaded(home, namespace)
    # Over the quota, but small enough for whatever the virtual node offers: the offer shrinks
    # with the pods other tests left on the remote cluster, and a pod the home scheduler cannot
    # place on the virtual node never reaches the quota.
    replica(home, namespace, "big", resources={"requests": {"cpu": "20m", "memory": "128Mi"}})

    def refused() -> dict[str, Any] | None:
        """The quota's refusal. On a loaded machine the first attempt may fail otherwise (the
        webhook call timing out) and is reported in the same condition, with its own message,
        until a retry meets the quota."""
        status = read_pod(home, namespace, "big").get("status") or {}
        return next((c for c in status.get("conditions") or []
                     if c.get("type") == "RemoteCreationFailed"
                     and "cpu" in c.get("message", "")), None)

    wait_for(refused, timeout=60, message="RemoteCreationFailed on the home pod, about cpu")
    events = wait_for(lambda: [e for e in home.core.list_namespaced_event(namespace).items
                               if e.involved_object.name == "big"
                               and e.reason == "RemoteCreationFailed"], timeout=60,
                      message="RemoteCreationFailed Event")
    assert events[0].type == "Warning"


def resource_offer_spec(remote: ClusterHandle, peered: RunningAgent) -> dict[str, Any]:
    from shared.api.resource_offer import RESOURCE_OFFER
    from shared.wellknown import RESOURCE_OFFER_NAME

    spec: dict[str, Any] = custom(remote).get_namespaced_custom_object(
        RESOURCE_OFFER.group, RESOURCE_OFFER.version, peered.tenant_namespace,
        RESOURCE_OFFER.plural, RESOURCE_OFFER_NAME)["spec"]
    return spec


def test_the_node_capacity_follows_a_shrinking_offer(home: ClusterHandle, remote: ClusterHandle,
                                                     peered: RunningAgent) -> None:
    from shared.quantity import format_quantity, parse_quantity

    def cpu() -> Any:
        capacity = home.core.read_node(peered.node_name).status.capacity or {}
        return parse_quantity(capacity["cpu"]) if "cpu" in capacity else None

    before = wait_for(cpu, timeout=60, message="node capacity from the offer")
    # What one pod can get (no more than one remote node has free), at most 1 cpu: whatever the
    # cluster's other workloads hold, the provider's own pod is scheduled, and takes its room.
    most = parse_quantity(wait_for(lambda: resource_offer_spec(remote, peered)
                                   ["maxPodResources"].get("cpu"), timeout=60,
                                   message="what one pod can get in the offer"))
    assert most > 0, "no remote node has cpu free: the provider's workload could not run"
    busy = f"busy-{peered.home_id}"
    remote.core.create_namespace({"metadata": {"name": busy}})
    try:
        remote.core.create_namespaced_pod(busy, {
            "metadata": {"name": "local-workload"},
            "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {
                "requests": {"cpu": format_quantity(min(most, parse_quantity("1")))}}}]}})
        wait_for(lambda: remote.core.read_namespaced_pod("local-workload", busy).spec.node_name,
                 timeout=60, message="the provider's own pod scheduled")
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


@pytest.mark.local_clusters(reason="the home API server calls the agent's webhook on loopback")
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
        wait_for(lambda: remote_pods(remote, twin)["plain"].status.phase == "Running",
                 timeout=60, message="running remotely")
        wait_for(lambda: home_ready(home, namespace, "plain"), timeout=60,
                 message="Running and Ready at home")
    finally:
        registrations.delete_mutating_webhook_configuration(name)


# --- extended resources, and a pod no remote node can hold -----------------------------------

GPU = "nvidia.com/gpu"


def _gpu_pod(home: ClusterHandle, namespace: str, name: str, gpus: str,
             **spec: Any) -> None:
    """A pod asking for GPUs as users write it: limits only (requests default to them)."""
    home.core.create_namespaced_pod(namespace, {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "train", "image": "busybox",
                                 "command": ["sleep", "3600"],
                                 "resources": {"limits": {GPU: gpus}}}],
                 **REMOTE_STRATEGY, **spec}})


def _max_pod_resources(home: ClusterHandle, node: str) -> dict[str, str]:
    """The virtual node's MAX_POD_ANNOTATION."""
    import json

    from shared.forge.node import MAX_POD_ANNOTATION

    annotations = home.core.read_node(node).metadata.annotations or {}
    return json.loads(annotations.get(MAX_POD_ANNOTATION) or "{}")  # type: ignore[no-any-return]


def test_a_lent_gpu_is_offered_runs_a_pod_remotely_and_a_pod_no_node_holds_says_why(
        home: ClusterHandle, remote: ClusterHandle, namespace: str,
        peered: RunningAgent) -> None:
    """The enforcer lends nvidia.com/gpu (not example.com/dongle); one remote node gets 4 GPUs
    and 4 dongles as a device plugin would advertise them. The offer (half of what is free) and
    the virtual node carry 2 GPUs and no dongle; a pod limited to 1 GPU runs on the GPU node;
    a second one is over the Quota's 1 GPU and refused, the refusal naming the GPU. Then a pod
    no remote node can hold (one agent and enforcer for both: each peering costs a process)."""
    from shared.quantity import parse_quantity
    from tests.e2e.devices import advertised, schedulable_node

    custom(remote).create_namespaced_custom_object(
        "offloading.liqo.io", "v1beta1", peered.tenant_namespace, "quotas", {
            "apiVersion": "offloading.liqo.io/v1beta1", "kind": "Quota",
            "metadata": {"name": "gpus"},
            "spec": {"consumerClusterId": peered.home_id,
                     "resources": {GPU: "1", "cpu": "1000"}}})
    gpu_node = schedulable_node(remote)
    with advertised(remote, gpu_node, {GPU: "4", "example.com/dongle": "4"}):
        def offered() -> dict[str, Any] | None:
            spec = resource_offer_spec(remote, peered)
            return spec if spec["resources"].get(GPU) == "2" else None

        spec = wait_for(offered, timeout=60, message="2 GPUs in the offer")
        assert "example.com/dongle" not in spec["resources"]  # not lent
        assert spec["maxPodResources"][GPU] == "2"

        def node_gpus() -> Any:
            node = home.core.read_node(peered.node_name)
            return node if (node.status.allocatable or {}).get(GPU) == "2" else None

        node = wait_for(node_gpus, timeout=60, message="2 GPUs on the virtual node")
        assert node.status.capacity[GPU] == "2"
        assert "example.com/dongle" not in node.status.capacity
        assert wait_for(lambda: _max_pod_resources(home, peered.node_name).get(GPU) == "2",
                        timeout=60, message="what one pod can get on the virtual node")

        twin = offloaded(home, namespace)
        _gpu_pod(home, namespace, "one-gpu", "1")
        wait_for(lambda: home_ready(home, namespace, "one-gpu"), timeout=60,
                 message="the 1-GPU pod Running at home")
        remote_pod = remote_pods(remote, twin)["one-gpu"]
        assert remote_pod.spec.node_name == gpu_node
        assert remote_pod.spec.containers[0].resources.requests[GPU] == "1"

        _gpu_pod(home, namespace, "second-gpu", "1")

        def refused() -> dict[str, Any] | None:
            status = read_pod(home, namespace, "second-gpu").get("status") or {}
            return next((c for c in status.get("conditions") or []
                         if c.get("type") == "RemoteCreationFailed"
                         and "quota exceeded for nvidia.com/gpu" in c.get("message", "")), None)

        condition = wait_for(refused, timeout=60, message="the second GPU pod refused")
        assert "requested 1, used 1 of 1" in condition["message"]
        for name in ("one-gpu", "second-gpu"):
            home.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        wait_for(lambda: "one-gpu" not in remote_pods(remote, twin), timeout=60,
                 message="the GPU pod gone remotely before its GPUs are")

        # A pod bigger than any remote node. The test clusters have one worker each, whose
        # offer (half of it) the home scheduler respects; with several nodes, a pod within
        # their sum but above the largest is bound here by the scheduler. Bound by name, it
        # takes that place: the agent makes no ShadowPod for it (it would sit Pending
        # remotely, holding the quota) and, without a controller to make it again elsewhere,
        # holds it saying why (tests/e2e/test_pod_fit.py: the pods it gives back).
        largest = _max_pod_resources(home, peered.node_name)["cpu"]
        assert parse_quantity(largest) < 500  # the virtual node says beforehand it cannot
        home.core.create_namespaced_pod(namespace, {
            "metadata": {"name": "too-big"},
            "spec": {"nodeName": peered.node_name, "tolerations": REMOTE_STRATEGY["tolerations"],
                     "containers": [{"name": "app", "image": "busybox",
                                     "resources": {"requests": {"cpu": "500"}}}]}})

        def held() -> dict[str, Any] | None:
            status = read_pod(home, namespace, "too-big").get("status") or {}
            return status if status.get("reason") == "OffloadingBackOff" else None

        status = wait_for(held, timeout=60, message="the pod held at home, saying why")
        assert status["phase"] == "Pending"
        assert f"cpu 500 > {largest}" in status["message"]
        assert "no controller" in status["message"]
        events = wait_for(lambda: [e for e in home.core.list_namespaced_event(namespace).items
                                   if e.involved_object.name == "too-big"
                                   and e.reason == "OffloadingBackOff"], timeout=60,
                          message="the OffloadingBackOff Event on the home pod")
        assert events[0].type == "Warning" and f"cpu 500 > {largest}" in events[0].message
        assert "too-big" not in shadow_pod_names(remote, twin)
        home.core.delete_namespaced_pod("too-big", namespace, grace_period_seconds=0)
