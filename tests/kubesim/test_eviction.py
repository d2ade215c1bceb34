"""pods/eviction and the disruption controller: a PodDisruptionBudget's status says how many pods
may go, and an eviction beyond it is refused with 429, as kube-apiserver and
kube-controller-manager do (the same test runs against a real cluster)."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.helpers import wait_for
from tests.kubesim.test_controllers_cluster import pod_manifest


def evict(home: Any, namespace: str, name: str) -> ApiException | None:
    try:
        home.core.create_namespaced_pod_eviction(name, namespace, {
            "apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace}})
    except ApiException as error:
        return error
    return None


def budget(home: Any, namespace: str, name: str, **spec: Any) -> dict[str, Any]:
    policy = client.PolicyV1Api(home.api_client)
    policy.create_namespaced_pod_disruption_budget(namespace, {
        "metadata": {"name": name}, "spec": {"selector": {"matchLabels": {"tier": name}},
                                             **spec}})
    return {"name": name}


def budget_status(home: Any, namespace: str, name: str) -> dict[str, Any]:
    read = client.PolicyV1Api(home.api_client).read_namespaced_pod_disruption_budget(
        name, namespace)
    return dict(home.api_client.sanitize_for_serialization(read).get("status") or {})


def ready_pods(home: Any, namespace: str, tier: str, count: int) -> list[str]:
    names = [f"{tier}-{index}" for index in range(count)]
    for name in names:
        manifest = pod_manifest(name)
        manifest["metadata"]["labels"]["tier"] = tier
        home.core.create_namespaced_pod(namespace, manifest)
    for name in names:
        wait_for(lambda n=name: any(c.type == "Ready" and c.status == "True" for c in
                                    home.core.read_namespaced_pod(n, namespace).status.conditions
                                    or []), timeout=60, message=f"{name} ready")
    return names


def deleting(home: Any, namespace: str, name: str) -> bool:
    try:
        pod = home.core.read_namespaced_pod(name, namespace)
        return pod.metadata.deletion_timestamp is not None
    except ApiException as error:
        return error.status == 404


def test_an_eviction_spends_the_budget_and_is_refused_once_it_is_spent(home: Any,
                                                                     namespace: str) -> None:
    first, second = ready_pods(home, namespace, "web", 2)
    budget(home, namespace, "web", minAvailable=1)
    status = wait_for(lambda: (s := budget_status(home, namespace, "web"))
                      .get("currentHealthy") == 2 and s, timeout=30, message="budget computed")
    assert (status["disruptionsAllowed"], status["desiredHealthy"], status["expectedPods"]) == (
        1, 1, 2)
    assert status["observedGeneration"] == 1
    assert [c["status"] for c in status["conditions"] if c["type"] == "DisruptionAllowed"] == [
        "True"]

    assert evict(home, namespace, first) is None
    wait_for(lambda: deleting(home, namespace, first))
    refused = evict(home, namespace, second)
    assert refused is not None and refused.status == 429
    body = json.loads(refused.body)
    assert body["reason"] == "TooManyRequests"
    assert body["message"] == ("Cannot evict pod as it would violate the pod's disruption "
                               "budget.")
    assert body["details"]["causes"] == [{
        "reason": "DisruptionBudget",
        "message": "The disruption budget web needs 1 healthy pods and has 1 currently"}]
    assert not deleting(home, namespace, second)

    # the budget loosened (a new generation, computed again): the eviction goes through
    client.PolicyV1Api(home.api_client).patch_namespaced_pod_disruption_budget(
        "web", namespace, {"spec": {"minAvailable": 0}})
    wait_for(lambda: evict(home, namespace, second) is None, timeout=30,
             message="evicted once the budget allows it")
    wait_for(lambda: deleting(home, namespace, second))


def test_a_pod_under_two_budgets_or_not_running_yet(home: Any, namespace: str) -> None:
    [pod] = ready_pods(home, namespace, "db", 1)
    budget(home, namespace, "db", maxUnavailable=0)
    policy = client.PolicyV1Api(home.api_client)
    policy.create_namespaced_pod_disruption_budget(namespace, {
        "metadata": {"name": "any-db"}, "spec": {"selector": {"matchLabels": {"app": pod}},
                                                 "maxUnavailable": 1}})
    refused = evict(home, namespace, pod)
    assert refused is not None and refused.status == 500
    assert json.loads(refused.body)["message"] == (
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does "
        "not support.")

    # A pod nobody runs yet (Pending) goes whatever its budget says.
    manifest = pod_manifest("pending")
    manifest["metadata"]["labels"]["tier"] = "db"
    manifest["spec"]["nodeSelector"] = {"no-such": "node"}
    home.core.create_namespaced_pod(namespace, manifest)
    assert evict(home, namespace, "pending") is None
    wait_for(lambda: deleting(home, namespace, "pending"))
