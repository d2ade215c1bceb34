"""End to end: a remote pod the provider's API server refuses after the ShadowPod was admitted
(here a ResourceQuota of the twin namespace) is shown on the home pod as the RemoteCreationFailed
condition and one Warning Event, and the pod runs once the quota allows it."""

from __future__ import annotations

from typing import Any

from tests.conftest import ClusterHandle
from tests.e2e.test_offloading import offloaded, read_pod, replica, running_and_ready
from tests.helpers import wait_for
from tests.home_agent.conftest import RunningAgent


def remote_creation_failed(home: ClusterHandle, namespace: str, name: str) -> Any:
    conditions = (read_pod(home, namespace, name).get("status") or {}).get("conditions")
    return next((c for c in conditions or [] if c["type"] == "RemoteCreationFailed"), None)


def test_a_remote_quota_refusing_the_pod_is_shown_at_home_until_it_allows_it(
        home: ClusterHandle, remote: ClusterHandle, namespace: str,
        peered: RunningAgent) -> None:
    twin = offloaded(home, namespace)
    remote.core.create_namespaced_resource_quota(twin, {
        "metadata": {"name": "no-pods"}, "spec": {"hard": {"pods": "0"}}})
    replica(home, namespace, "web")

    def refused() -> Any:
        condition = remote_creation_failed(home, namespace, "web")
        return condition if condition and "exceeded quota" in condition["message"] else None

    condition = wait_for(refused, timeout=60,
                         message="RemoteCreationFailed on the home pod, about the quota")
    assert condition["status"] == "True" and condition["reason"] == "Forbidden"
    assert "exceeded quota: no-pods" in condition["message"]

    def quota_events() -> list[Any]:
        return [e for e in home.core.list_namespaced_event(namespace).items
                if e.involved_object.name == "web" and e.reason == "RemoteCreationFailed"
                and "exceeded quota" in (e.message or "")]

    events = wait_for(quota_events, timeout=60, message="RemoteCreationFailed Event")
    assert events[0].type == "Warning"

    remote.core.delete_namespaced_resource_quota("no-pods", twin)
    wait_for(lambda: running_and_ready(read_pod(home, namespace, "web")), timeout=90,
             message="the pod runs once the quota allows it")
    assert remote_creation_failed(home, namespace, "web") is None
    # the enforcer's retries repeated the refusal; the home pod heard of it once
    assert len(quota_events()) == 1
