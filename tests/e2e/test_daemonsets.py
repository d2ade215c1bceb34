"""End to end: a DaemonSet whose pods tolerate everything gets a pod on the virtual node (the
DaemonSet controller wants one on every node its pod tolerates); the agent never offloads it,
even in an offloaded namespace: the pod stays Pending saying why and how to keep the DaemonSet
off virtual nodes, on the pod and on the DaemonSet, and is not deleted (its controller would
only make it again)."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from tests.conftest import ClusterHandle
from tests.e2e.test_offloading import apps, offloaded, shadow_pod_names
from tests.helpers import wait_for
from tests.home_agent.conftest import RunningAgent

NODE_AGENT = {"app": "node-agent"}


def pod_on(home: ClusterHandle, namespace: str, node: str) -> Any:
    """The DaemonSet's pod bound to `node`, or None."""
    return next((pod for pod in home.core.list_namespaced_pod(
        namespace, label_selector="app=node-agent").items if pod.spec.node_name == node), None)


def events_about(home: ClusterHandle, namespace: str, kind: str, name: str) -> dict[str, str]:
    return {e.reason: e.message for e in home.core.list_namespaced_event(namespace).items
            if e.involved_object.kind == kind and e.involved_object.name == name}


def test_a_daemon_set_tolerating_everything_is_not_offloaded_and_says_why(
        home: ClusterHandle, remote: ClusterHandle, namespace: str,
        peered: RunningAgent) -> None:
    twin = offloaded(home, namespace)
    apps(home).create_namespaced_daemon_set(namespace, {
        "metadata": {"name": "node-agent"},
        "spec": {"selector": {"matchLabels": NODE_AGENT},
                 "template": {"metadata": {"labels": NODE_AGENT}, "spec": {
                     "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "agent", "image": "busybox",
                                     "command": ["sleep", "3600"]}]}}}})
    node = peered.node_name
    pod = wait_for(lambda: pod_on(home, namespace, node), timeout=60,
                   message="the DaemonSet's pod bound to the virtual node")

    def left() -> Any:
        found = home.core.read_namespaced_pod(pod.metadata.name, namespace)
        return found if found.status.reason == "DaemonSetPodNotOffloaded" else None

    status = wait_for(left, timeout=60, message="the pod left Pending, saying why").status
    assert status.phase == "Pending"
    assert "DaemonSet node-agent is not offloaded" in status.message
    assert "liqo.io/type NotIn [virtual-node]" in status.message
    scheduled = next(c for c in status.conditions if c.type == "PodScheduled")
    assert (scheduled.status, scheduled.reason) == ("False", "DaemonSetPodNotOffloaded")
    on_pod = wait_for(lambda: events_about(home, namespace, "Pod", pod.metadata.name).get(
        "DaemonSetPodNotOffloaded"), timeout=60, message="the Event on the pod")
    assert on_pod == status.message
    on_set = wait_for(lambda: events_about(home, namespace, "DaemonSet", "node-agent").get(
        "DaemonSetPodNotOffloaded"), timeout=60, message="the Event on the DaemonSet")
    assert on_set == f"pod {pod.metadata.name}: {status.message}"

    # The DaemonSet counts the pod as wanted and unavailable, as for any node that cannot run it.
    wait_for(lambda: (s := apps(home).read_namespaced_daemon_set("node-agent", namespace)
                      .status).desired_number_scheduled == s.current_number_scheduled
             and (s.number_unavailable or 0) >= 1, timeout=60,
             message="the DaemonSet's status counts the virtual node's pod")
    assert shadow_pod_names(remote, twin) == set()
    assert pod_on(home, namespace, node).metadata.uid == pod.metadata.uid, "never deleted"
    assert client.CoreV1Api(remote.api_client).list_namespaced_pod(twin).items == []
