"""Deployments and ReplicaSets, through the API (also on real clusters)."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from tests.helpers import wait_for


def deployment(name: str, replicas: int, image: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "app", "image": image}]}},
        },
    }


def settled(apps: client.AppsV1Api, namespace: str, name: str, replicas: int) -> Any:
    found = apps.read_namespaced_deployment(name, namespace)
    status = found.status
    if (status.observed_generation == found.metadata.generation
            and status.replicas == replicas and status.updated_replicas == replicas
            and status.ready_replicas == replicas and status.available_replicas == replicas):
        return found
    return None


def replica_sets(apps: client.AppsV1Api, namespace: str) -> dict[str, Any]:
    return {rs.metadata.name: rs for rs in apps.list_namespaced_replica_set(namespace).items}


def pods_of(home: Any, namespace: str, name: str) -> list[Any]:
    return [p for p in home.core.list_namespaced_pod(namespace, label_selector=f"app={name}")
            .items if p.metadata.deletion_timestamp is None]


def test_deployment_runs_its_replicas_through_a_replica_set(home, namespace) -> None:
    apps = client.AppsV1Api(home.api_client)
    apps.create_namespaced_deployment(namespace, deployment("web", 3, "nginx:1.25"))
    found = wait_for(lambda: settled(apps, namespace, "web", 3), timeout=90)
    available = next(c for c in found.status.conditions if c.type == "Available")
    assert available.status == "True"
    [replica_set] = replica_sets(apps, namespace).values()
    template_hash = replica_set.metadata.labels["pod-template-hash"]
    assert replica_set.metadata.name == f"web-{template_hash}"
    assert replica_set.metadata.owner_references[0].kind == "Deployment"
    assert replica_set.status.ready_replicas == 3
    pods = pods_of(home, namespace, "web")
    assert len(pods) == 3
    for pod in pods:
        assert pod.metadata.labels["pod-template-hash"] == template_hash
        assert pod.metadata.owner_references[0].name == replica_set.metadata.name
        assert pod.metadata.name.startswith(f"{replica_set.metadata.name}-")


def test_template_change_rolls_out_a_new_replica_set(home, namespace) -> None:
    apps = client.AppsV1Api(home.api_client)
    apps.create_namespaced_deployment(namespace, deployment("web", 2, "nginx:1.25"))
    wait_for(lambda: settled(apps, namespace, "web", 2), timeout=90)
    [old_name] = replica_sets(apps, namespace)
    apps.patch_namespaced_deployment("web", namespace, {"spec": {"template": {"spec": {
        "containers": [{"name": "app", "image": "nginx:1.26"}]}}}})
    wait_for(lambda: settled(apps, namespace, "web", 2) and len(
        replica_sets(apps, namespace)) == 2 and replica_sets(apps, namespace)[old_name]
        .spec.replicas == 0 and len(pods_of(home, namespace, "web")) == 2, timeout=90)
    sets = replica_sets(apps, namespace)
    [new_name] = set(sets) - {old_name}
    assert sets[new_name].spec.replicas == 2
    assert {p.spec.containers[0].image for p in pods_of(home, namespace, "web")} == {
        "nginx:1.26"}


def test_scaling_down_removes_pods(home, namespace) -> None:
    apps = client.AppsV1Api(home.api_client)
    apps.create_namespaced_deployment(namespace, deployment("web", 3, "nginx:1.25"))
    wait_for(lambda: settled(apps, namespace, "web", 3), timeout=90)
    apps.patch_namespaced_deployment("web", namespace, {"spec": {"replicas": 1}})
    wait_for(lambda: settled(apps, namespace, "web", 1)
             and len(pods_of(home, namespace, "web")) == 1, timeout=90)
