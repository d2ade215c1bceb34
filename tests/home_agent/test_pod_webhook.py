"""The pod webhook applies the namespace's pod offloading strategy to new pods."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from kubernetes import client

from annex.mirror import Mirror
from home_agent.webhook import WebhookMirrors, pod_mutation
from shared.admission import review_response
from tests.conftest import ClusterHandle
from tests.helpers import wait_for
from tests.home_agent.play import custom, offload_namespace, read_pod
from tests.home_agent.webhook import mutating_webhook_configuration, webhook_serving

TOLERATION = {"key": "virtual-node.liqo.io/not-allowed", "operator": "Exists",
              "effect": "NoExecute"}
REQUIREMENT = {"key": "liqo.io/type", "operator": "In", "values": ["virtual-node"]}


def create_pod(home: ClusterHandle, namespace: str, name: str) -> dict[str, Any]:
    home.core.create_namespaced_pod(namespace, {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "nginx:1"}]}})
    return read_pod(home, namespace, name)


@pytest.mark.local_clusters(reason="the home API server calls the agent's webhook on loopback")
@pytest.mark.parametrize("strategy", ["Remote", "LocalAndRemote", "Local"])
def test_new_pods_get_the_namespace_strategy(home: ClusterHandle, namespace: str,
                                             start_agent: Any, tmp_path: Path,
                                             strategy: str) -> None:
    serving = webhook_serving(tmp_path)
    start_agent(*serving.flags)
    offload_namespace(home, namespace, podOffloadingStrategy=strategy)
    wait_for(lambda: home.core.read_namespace(namespace).metadata.labels.get(
        "liqo.io/scheduling-enabled") == "true", timeout=30,
        message="the agent labels the offloaded namespace for the webhook")
    registrations = client.AdmissionregistrationV1Api(home.api_client)
    name = f"annex-test-{namespace}"
    registrations.create_mutating_webhook_configuration(
        mutating_webhook_configuration(name, serving, namespace))
    try:
        pod = create_pod(home, namespace, "web")
    finally:
        registrations.delete_mutating_webhook_configuration(name)
    spec = pod["spec"]
    tolerated = TOLERATION in (spec.get("tolerations") or [])
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    terms = (affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get(
        "nodeSelectorTerms") or []
    required = any(REQUIREMENT in (t.get("matchExpressions") or []) for t in terms)
    assert (tolerated, required) == {"Remote": (True, True), "LocalAndRemote": (True, False),
                                     "Local": (False, False)}[strategy]


@pytest.mark.local_clusters(reason="the home API server calls the agent's webhook on loopback")
def test_with_several_remotes_pods_land_only_on_virtual_nodes_the_cluster_selector_selects(
        home: ClusterHandle, namespace: str, start_agent: Any, tmp_path: Path) -> None:
    """Two virtual nodes with room and both Ready; the namespace is offloaded to one of them.
    The webhook makes the clusterSelector part of the pods' required node affinity, so the
    scheduler never puts them on the other; their not-ready toleration is the selected
    VirtualNode's, not the other one's longer setting."""
    serving = webhook_serving(tmp_path)
    chosen, other = start_agent(*serving.flags), start_agent()
    api = custom(home)
    for agent, seconds in ((chosen, 30), (other, 600)):
        api.create_namespaced_custom_object(
            "offloading.liqo.io", "v1beta1", namespace, "virtualnodes", {
                "apiVersion": "offloading.liqo.io/v1beta1", "kind": "VirtualNode",
                "metadata": {"name": agent.remote_id},
                "spec": {"clusterId": agent.remote_id, "notReadyTolerationSeconds": seconds,
                         "resources": {"cpu": "8", "memory": "16Gi", "pods": "20"}}})
    for agent in (chosen, other):
        wait_for(lambda agent=agent: node_ready_with_room(home, agent.node_name), timeout=30,
                 message=f"{agent.node_name} Ready with capacity")
    selector = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "liqo.io/remote-cluster-id", "operator": "In", "values": [chosen.remote_id]}]}]}
    offload_namespace(home, namespace, podOffloadingStrategy="Remote", clusterSelector=selector)
    wait_for(lambda: home.core.read_namespace(namespace).metadata.labels.get(
        "liqo.io/scheduling-enabled") == "true", timeout=30,
        message="the agent labels the offloaded namespace for the webhook")
    registrations = client.AdmissionregistrationV1Api(home.api_client)
    name = f"annex-test-{namespace}"
    registrations.create_mutating_webhook_configuration(
        mutating_webhook_configuration(name, serving, namespace))
    try:
        pods = [create_pod(home, namespace, f"web-{index}") for index in range(6)]
    finally:
        registrations.delete_mutating_webhook_configuration(name)
    for pod in pods:
        terms = pod["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert terms == [{"matchExpressions": [
            *selector["nodeSelectorTerms"][0]["matchExpressions"], REQUIREMENT]}]
        assert [t for t in pod["spec"]["tolerations"] if t["key"].startswith("node.")] == [
            {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}
            for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")]

    def placement() -> dict[str, str | None]:
        return {pod["metadata"]["name"]: read_pod(home, namespace, pod["metadata"]["name"])[
            "spec"].get("nodeName") for pod in pods}

    placed = wait_for(lambda: all((found := placement()).values()) and found, timeout=60,
                      message="every pod scheduled")
    assert set(placed.values()) == {chosen.node_name}


def node_ready_with_room(home: ClusterHandle, name: str) -> bool:
    try:
        found = home.core.read_node(name)
    except client.exceptions.ApiException:
        return False
    ready = [c for c in found.status.conditions or [] if c.type == "Ready"]
    return bool(ready and ready[0].status == "True"
                and (found.status.allocatable or {}).get("pods") == "20")


def test_the_webhook_answers_with_a_json_patch_only_for_offloaded_namespaces() -> None:
    mirrors = WebhookMirrors(offloadings=Mirror(), nodes=Mirror(), virtual_nodes=Mirror())
    mirrors.offloadings.apply(None, {
        "metadata": {"namespace": "shop", "name": "offloading"},
        "spec": {"podOffloadingStrategy": "Remote"}})
    pod = {"metadata": {"name": "web"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}

    def review(namespace: str) -> dict[str, Any]:
        request = {"uid": "u1", "operation": "CREATE", "namespace": namespace, "object": pod}
        return review_response("u1", patch=pod_mutation(mirrors, request))

    answer = review("shop")["response"]
    assert answer["uid"] == "u1" and answer["allowed"] is True
    mutated = jsonpatch.apply_patch(pod, json.loads(base64.b64decode(answer["patch"])))
    assert mutated["spec"]["tolerations"][0]["key"] == "virtual-node.liqo.io/not-allowed"
    assert "patch" not in review("elsewhere")["response"]
