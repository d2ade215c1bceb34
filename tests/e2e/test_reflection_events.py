"""End to end: remote Events back home, with the remote enforcer
and the home agent as real processes. Events in the twin namespace about the offloaded pod or a
reflected object show on the home object and follow the remote Event; Events about anything the
agent did not reflect stay remote; `--event-reflection-workers 0` turns it off.

The Events these tests write in the twin namespace are what the remote kubelet or a controller
would write (the remote pod's Started Event is checked too), so they also pass on real
clusters."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from tests.conftest import ClusterHandle
from tests.e2e.conftest import Peer
from tests.e2e.test_offloading import REMOTE_STRATEGY, offloaded
from tests.helpers import wait_for
from tests.home_agent.test_reflection_event import (
    TEST_COMPONENT,
    home_events,
    write_remote_event,
)

REMOTE_SUFFIX = " (remote)"


def reference(obj: Any, api_version: str, kind: str) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": obj.metadata.name,
            "uid": obj.metadata.uid}


def test_the_remote_pods_events_show_on_the_home_pod_and_follow_the_remote_count(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    peer()
    twin = offloaded(home, namespace)
    home_pod = home.core.create_namespaced_pod(namespace, {
        "metadata": {"name": "app"},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.25"}], **REMOTE_STRATEGY}})
    remote_pod = wait_for(lambda: next(iter(remote.core.list_namespaced_pod(
        twin, field_selector="metadata.name=app").items), None), timeout=60,
        message="the remote pod")

    started = wait_for(lambda: home_events(home, namespace, home_pod.metadata.uid).get("Started"),
                       timeout=60, message="the remote kubelet's Started Event on the home pod")
    assert started["source"]["component"].endswith(REMOTE_SUFFIX)
    assert started["involvedObject"]["name"] == "app"

    name = write_remote_event(remote, twin, reference(remote_pod, "v1", "Pod"), "Probing")
    copy = wait_for(lambda: home_events(home, namespace, home_pod.metadata.uid).get("Probing"),
                    timeout=30, message="the test's Event on the home pod")
    assert copy["source"]["component"] == TEST_COMPONENT + REMOTE_SUFFIX
    assert copy["count"] == 1

    later = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    remote.core.patch_namespaced_event(name, twin, {"count": 5, "lastTimestamp": later})
    wait_for(lambda: home_events(home, namespace, home_pod.metadata.uid)["Probing"]["count"] == 5,
             timeout=30, message="the home copy follows the remote count")

    remote.core.delete_namespaced_event(name, twin)
    wait_for(lambda: "Probing" not in home_events(home, namespace, home_pod.metadata.uid),
             timeout=30, message="the home copy goes with the remote Event")


def test_events_about_a_reflected_configmap_come_home_and_others_stay_remote(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    peer("--event-reflection-workers", "1")  # one worker: queued Events handled in order
    twin = offloaded(home, namespace)
    home_settings = home.core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "settings"}, "data": {"mode": "blue"}})
    remote_settings = wait_for(lambda: next(iter(remote.core.list_namespaced_config_map(
        twin, field_selector="metadata.name=settings").items), None), timeout=30,
        message="the ConfigMap reflected")
    foreign = remote.core.create_namespaced_config_map(
        twin, {"metadata": {"name": "foreign"}, "data": {"owner": "provider"}})
    home.core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "foreign"}, "data": {"owner": "home"}})

    write_remote_event(remote, twin, reference(foreign, "v1", "ConfigMap"), "AboutForeign")
    write_remote_event(remote, twin, {"apiVersion": "offloading.liqo.io/v1beta1",
                                      "kind": "ShadowPod", "name": "settings",
                                      "uid": str(uuid.uuid4())}, "AboutShadowPod")
    write_remote_event(remote, twin, {"apiVersion": "v1", "kind": "Pod", "name": "settings",
                                      "uid": str(uuid.uuid4())}, "AboutUnknownPod")
    # Written last: once it is home, the agent has had the others in hand (the exact selection
    # rules, one reconcile at a time, are tests/home_agent/test_reflection_event.py's).
    write_remote_event(remote, twin, reference(remote_settings, "v1", "ConfigMap"), "Witness")

    on_home_settings = wait_for(
        lambda: home_events(home, namespace, home_settings.metadata.uid).get("Witness"),
        timeout=30, message="the Event about the reflected ConfigMap on the home ConfigMap")
    assert on_home_settings["involvedObject"]["kind"] == "ConfigMap"
    assert on_home_settings["involvedObject"]["name"] == "settings"
    reasons = {event.reason for event in home.core.list_namespaced_event(namespace).items}
    assert not reasons & {"AboutForeign", "AboutShadowPod", "AboutUnknownPod"}


def test_zero_workers_leave_remote_events_remote(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    peer("--event-reflection-workers", "0")
    twin = offloaded(home, namespace)
    home_settings = home.core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "settings"}, "data": {"mode": "blue"}})
    remote_settings = wait_for(lambda: next(iter(remote.core.list_namespaced_config_map(
        twin, field_selector="metadata.name=settings").items), None), timeout=30,
        message="the ConfigMap reflected")
    write_remote_event(remote, twin, reference(remote_settings, "v1", "ConfigMap"), "Ignored")
    # The agent is busy with the namespace still: a ConfigMap created after the Event reaching
    # the twin namespace shows it has had the time to reflect the Event, had it watched them.
    home.core.create_namespaced_config_map(namespace, {"metadata": {"name": "witness"}})
    wait_for(lambda: remote.core.list_namespaced_config_map(
        twin, field_selector="metadata.name=witness").items, timeout=30,
        message="the witness ConfigMap reflected")
    assert home_events(home, namespace, home_settings.metadata.uid) == {}
