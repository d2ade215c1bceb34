"""DaemonSets, through the API (also on real clusters): one pod a node where the set's pod
fits the node's labels and taints, placed through a node affinity naming the node, the daemon
tolerations added; a template change rolls through the pods; the status counts them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.devices import schedulable_node
from tests.helpers import wait_for

TOLERATE_ALL = [{"operator": "Exists"}]


def daemon_set(name: str, image: str = "nginx:1.25", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {
                         "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "app", "image": image}], **spec}}}}


def pods_by_node(core: client.CoreV1Api, namespace: str, name: str) -> dict[str, Any]:
    """The set's live pods by the node their affinity names."""
    found = {}
    for pod in core.list_namespaced_pod(namespace, label_selector=f"app={name}").items:
        if pod.metadata.deletion_timestamp is None:
            terms = (pod.spec.affinity.node_affinity
                     .required_during_scheduling_ignored_during_execution.node_selector_terms)
            found[terms[0].match_fields[0].values[0]] = pod
    return found


@pytest.fixture
def tainted_node(home: Any) -> Iterator[str]:
    """A Node without a kubelet (so NotReady once the node lifecycle controller looks), tainted
    as a virtual node is: what only a pod tolerating everything lands on."""
    name = f"ds-test-{uuid.uuid4().hex[:8]}"
    home.core.create_node({"metadata": {"name": name, "labels": {"ds-test": "yes"}},
                           "spec": {"taints": [{"key": "example.com/dedicated", "value": "x",
                                                "effect": "NoExecute"}]}})
    room = {"pods": "10", "cpu": "1", "memory": "1Gi"}
    home.core.patch_node_status(name, {"status": {"capacity": room, "allocatable": room}})
    yield name
    home.core.delete_node(name)


def test_a_daemon_set_runs_one_pod_on_each_schedulable_node(home: Any, namespace: str) -> None:
    apps = client.AppsV1Api(home.api_client)
    apps.create_namespaced_daemon_set(namespace, daemon_set("agent"))
    worker = schedulable_node(home)
    pods = wait_for(lambda: (found := pods_by_node(home.core, namespace, "agent")).get(worker)
                    and found, timeout=60, message="the worker's daemon pod")
    pod = pods[worker]
    assert pod.metadata.owner_references[0].kind == "DaemonSet"
    assert pod.metadata.owner_references[0].controller
    assert pod.metadata.labels["pod-template-generation"] == "1"
    assert pod.metadata.labels["controller-revision-hash"]
    assert pod.metadata.generate_name == "agent-"
    tolerations = {(t.key, t.effect) for t in pod.spec.tolerations}
    assert {("node.kubernetes.io/not-ready", "NoExecute"),
            ("node.kubernetes.io/unreachable", "NoExecute"),
            ("node.kubernetes.io/disk-pressure", "NoSchedule"),
            ("node.kubernetes.io/memory-pressure", "NoSchedule"),
            ("node.kubernetes.io/pid-pressure", "NoSchedule"),
            ("node.kubernetes.io/unschedulable", "NoSchedule")} <= tolerations
    created = apps.read_namespaced_daemon_set("agent", namespace)
    assert created.metadata.annotations["deprecated.daemonset.template.generation"] == "1"
    assert created.spec.update_strategy.type == "RollingUpdate"
    assert created.spec.update_strategy.rolling_update.max_unavailable == 1

    def settled() -> bool:
        status = apps.read_namespaced_daemon_set("agent", namespace).status
        count = len(pods_by_node(home.core, namespace, "agent"))
        return bool(status.observed_generation == 1
                    and status.desired_number_scheduled == status.current_number_scheduled
                    == status.number_ready == status.number_available
                    == status.updated_number_scheduled == count
                    and not status.number_unavailable)

    wait_for(settled, timeout=90, message="the status counts every pod ready")


def test_only_a_set_tolerating_a_nodes_taints_gets_a_pod_there(
        home: Any, namespace: str, tainted_node: str) -> None:
    apps = client.AppsV1Api(home.api_client)
    selector = {"ds-test": "yes"}
    apps.create_namespaced_daemon_set(namespace, daemon_set("plain", nodeSelector=selector))
    apps.create_namespaced_daemon_set(namespace, daemon_set(
        "everywhere", nodeSelector=selector, tolerations=TOLERATE_ALL))
    pods = wait_for(lambda: pods_by_node(home.core, namespace, "everywhere").get(tainted_node),
                    timeout=60, message="the tolerate-all set's pod for the tainted node")
    wait_for(lambda: home.core.read_namespaced_pod(pods.metadata.name, namespace).spec.node_name
             == tainted_node, timeout=60, message="scheduled onto the tainted node")
    wait_for(lambda: apps.read_namespaced_daemon_set("everywhere", namespace).status
             .desired_number_scheduled == 1, timeout=60, message="the tolerate-all set's status")
    status = wait_for(lambda: (s := apps.read_namespaced_daemon_set("plain", namespace).status)
                      .observed_generation and s, timeout=60, message="the plain set's status")
    assert status.desired_number_scheduled == 0
    assert pods_by_node(home.core, namespace, "plain") == {}


def test_a_template_change_rolls_through_the_pods(home: Any, namespace: str) -> None:
    apps = client.AppsV1Api(home.api_client)
    apps.create_namespaced_daemon_set(namespace, daemon_set("agent"))
    worker = schedulable_node(home)
    first = wait_for(lambda: pods_by_node(home.core, namespace, "agent").get(worker), timeout=60,
                     message="the first pod")
    apps.patch_namespaced_daemon_set("agent", namespace, {"spec": {"template": {"spec": {
        "containers": [{"name": "app", "image": "nginx:1.26"}]}}}})
    replaced = wait_for(lambda: (pod := pods_by_node(home.core, namespace, "agent").get(worker))
                        and pod.metadata.uid != first.metadata.uid and pod, timeout=90,
                        message="the worker's pod replaced")
    assert replaced.spec.containers[0].image == "nginx:1.26"
    assert replaced.metadata.labels["pod-template-generation"] == "2"
    assert replaced.metadata.labels["controller-revision-hash"] != (
        first.metadata.labels["controller-revision-hash"])
    assert apps.read_namespaced_daemon_set("agent", namespace).metadata.annotations[
        "deprecated.daemonset.template.generation"] == "2"
