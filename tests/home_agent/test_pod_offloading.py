"""Pods bound to the virtual node ⇄ ShadowPods: forged spec, updates, status back with remapped
addresses, the deletion handshake, OffloadingBackOff and creation failures. The test plays the
remote enforcer (it writes the ShadowPod status)."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from shared.forge.metadata import reflection_config
from shared.forge.pod import PodForgeConfig, remote_pod_spec
from shared.home_apiserver import advertised_address
from tests.conftest import ClusterHandle
from tests.helpers import wait_for
from tests.home_agent.play import (
    bound_pod,
    custom,
    extend,
    pod_gone,
    read_pod,
    report_shadow_status,
    shadow_pod,
    shadow_pod_exists,
)

REMAP_FLAGS = ("--remote-pod-cidr", "10.200.0.0/16", "--remapped-pod-cidr", "10.250.0.0/16",
               "--agent-ip", "192.0.2.10")


def running_status(pod_ip: str) -> dict[str, Any]:
    return {
        "phase": "Running",
        "nodeName": "remote-worker-0",
        "podStatus": {
            "phase": "Running", "podIP": pod_ip, "podIPs": [{"ip": pod_ip}],
            "hostIP": "10.1.0.7", "startTime": "2026-01-01T00:00:00Z",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "main", "image": "nginx:1", "imageID": "",
                                   "ready": True, "restartCount": 1, "started": True,
                                   "state": {"running": {"startedAt": "2026-01-01T00:00:01Z"}}}],
        },
        "recreations": 2,
        "carriedRestarts": {"main": 4},
    }


def test_a_bound_pod_becomes_a_shadow_pod_with_the_forged_spec(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_agent: Any) -> None:
    agent = start_agent()
    twin = extend(home, remote, agent, namespace)
    pod = bound_pod(home, namespace, "web", agent.node_name, labels={"app": "web"})
    shadow = wait_for(lambda: shadow_pod(remote, twin, "web"), timeout=30,
                      message="ShadowPod created")
    # Without --home-apiserver-host the agent points pods at the address the home API server
    # advertises in the kubernetes Service's EndpointSlice.
    slices = client.DiscoveryV1Api(home.api_client).list_namespaced_endpoint_slice(
        "default", label_selector="kubernetes.io/service-name=kubernetes").items
    address = advertised_address(home.api_client.sanitize_for_serialization(s) for s in slices)
    assert address is not None
    config = PodForgeConfig(reflection=reflection_config(agent.home_id, agent.remote_id),
                            home_apiserver_host=address[0], home_apiserver_port=address[1])
    assert shadow["spec"]["pod"] == remote_pod_spec(pod, config).spec
    assert shadow["metadata"]["labels"]["app"] == "web"
    assert shadow["metadata"]["labels"]["offloading.liqo.io/origin"] == agent.home_id
    assert shadow["metadata"]["labels"]["offloading.liqo.io/destination"] == agent.remote_id


def test_remote_status_comes_back_remapped(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_agent: Any) -> None:
    agent = start_agent(*REMAP_FLAGS)
    twin = extend(home, remote, agent, namespace)
    bound_pod(home, namespace, "web", agent.node_name)
    wait_for(lambda: shadow_pod(remote, twin, "web"), timeout=30, message="ShadowPod")
    report_shadow_status(remote, twin, "web", running_status("10.200.3.4"))

    def running() -> dict[str, Any] | None:
        status = read_pod(home, namespace, "web").get("status") or {}
        return status if status.get("phase") == "Running" else None

    status = wait_for(running, timeout=30, message="home pod Running")
    assert status["podIP"] == "10.250.3.4"
    assert status["podIPs"] == [{"ip": "10.250.3.4"}]
    assert status["hostIP"] == "192.0.2.10"
    # 1 restart of the current remote pod + 4 carried over from the two it replaced
    assert status["containerStatuses"][0]["restartCount"] == 5
    assert {"type": "Ready", "status": "True"}.items() <= status["conditions"][0].items()


def test_an_image_update_reaches_the_shadow_pod(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_agent: Any) -> None:
    agent = start_agent()
    twin = extend(home, remote, agent, namespace)
    bound_pod(home, namespace, "web", agent.node_name)
    wait_for(lambda: shadow_pod(remote, twin, "web"), timeout=30, message="ShadowPod")
    home.core.patch_namespaced_pod("web", namespace, {
        "metadata": {"labels": {"tier": "front"}},
        "spec": {"containers": [{"name": "main", "image": "nginx:2"}]}})

    def updated() -> bool:
        shadow = shadow_pod(remote, twin, "web")
        return (shadow["spec"]["pod"]["containers"][0]["image"] == "nginx:2"
                and shadow["metadata"]["labels"].get("tier") == "front")

    wait_for(updated, timeout=30, message="image and label propagated")


def test_deleting_the_home_pod_deletes_the_shadow_pod_then_releases_the_pod(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_agent: Any) -> None:
    agent = start_agent()
    twin = extend(home, remote, agent, namespace)
    bound_pod(home, namespace, "web", agent.node_name)
    wait_for(lambda: shadow_pod(remote, twin, "web"), timeout=30, message="ShadowPod")
    home.core.delete_namespaced_pod("web", namespace)  # default grace: 30 s
    wait_for(lambda: not shadow_pod_exists(remote, twin, "web"), timeout=30,
             message="ShadowPod deleted")
    wait_for(lambda: pod_gone(home, namespace, "web"), timeout=30,
             message="home pod released")


def test_a_pod_in_a_namespace_that_is_not_extended_backs_off(
        home: ClusterHandle, namespace: str, start_agent: Any) -> None:
    agent = start_agent()
    bound_pod(home, namespace, "stray", agent.node_name)

    def backed_off() -> bool:
        status = read_pod(home, namespace, "stray").get("status") or {}
        return status.get("phase") == "Pending" and status.get("reason") == "OffloadingBackOff"

    wait_for(backed_off, timeout=30, message="Pending/OffloadingBackOff")


def test_a_remote_creation_failure_is_shown_on_the_home_pod(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_agent: Any) -> None:
    agent = start_agent()
    # Accepted, but the twin namespace does not exist: the remote refuses the ShadowPod.
    twin = extend(home, remote, agent, namespace, create_twin=False)
    # No token: a pod that mounts one waits for its token Secret, which the remote refuses
    # first (below).
    bound_pod(home, namespace, "web", agent.node_name,
              spec={"automountServiceAccountToken": False})

    def failure() -> dict[str, Any] | None:
        conditions = (read_pod(home, namespace, "web").get("status") or {}).get("conditions")
        return next((c for c in conditions or [] if c["type"] == "RemoteCreationFailed"), None)

    condition = wait_for(failure, timeout=30, message="RemoteCreationFailed condition")
    assert condition["status"] == "True"
    assert condition["reason"] == "NotFound"
    events = wait_for(lambda: [e for e in home.core.list_namespaced_event(namespace).items
                               if e.involved_object.name == "web"
                               and e.reason == "RemoteCreationFailed"],
                      timeout=30, message="RemoteCreationFailed Event")
    assert "not found" in events[0].message

    bound_pod(home, namespace, "with-token", agent.node_name)
    events = wait_for(lambda: [e for e in home.core.list_namespaced_event(namespace).items
                               if e.involved_object.name == "with-token"
                               and e.reason == "FailedReflection"],
                      timeout=30, message="the token Secret's refusal, on the pod")
    assert "service-account token" in events[0].message and "not found" in events[0].message
    assert not shadow_pod_exists(remote, twin, "with-token")


def test_an_unknown_anti_affinity_preset_is_reported_and_ignored(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_agent: Any) -> None:
    agent = start_agent()
    twin = extend(home, remote, agent, namespace)
    bound_pod(home, namespace, "web", agent.node_name,
              annotations={"liqo.io/anti-affinity-preset": "sometimes"})
    shadow = wait_for(lambda: shadow_pod(remote, twin, "web"), timeout=30,
                      message="offloaded all the same")
    assert "affinity" not in shadow["spec"]["pod"]
    events = wait_for(lambda: [e for e in home.core.list_namespaced_event(namespace).items
                               if e.involved_object.name == "web"
                               and e.reason == "FailedReflection"], timeout=30,
                      message="an Event names the bad value")
    assert "sometimes" in events[0].message


def remote_creation_failed(home: ClusterHandle, namespace: str, name: str) -> dict[str, Any] | None:
    conditions = (read_pod(home, namespace, name).get("status") or {}).get("conditions")
    return next((c for c in conditions or [] if c["type"] == "RemoteCreationFailed"), None)


def home_events(home: ClusterHandle, namespace: str, name: str, reason: str) -> list[Any]:
    return [e for e in home.core.list_namespaced_event(namespace).items
            if e.involved_object.name == name and e.reason == reason]


def test_a_remote_pod_the_remote_refuses_is_shown_on_the_home_pod_until_it_exists(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_agent: Any) -> None:
    agent = start_agent()
    twin = extend(home, remote, agent, namespace)
    bound_pod(home, namespace, "web", agent.node_name)
    wait_for(lambda: shadow_pod(remote, twin, "web"), timeout=30, message="ShadowPod")
    message = ('pods "web" is forbidden: exceeded quota: compute, requested: pods=1, '
               'used: pods=0, limited: pods=0')
    refusal = {"type": "PodCreated", "status": "False", "reason": "Forbidden",
               "message": message, "lastTransitionTime": "2026-01-01T00:00:00Z"}
    report_shadow_status(remote, twin, "web", {"conditions": [refusal]})
    condition = wait_for(lambda: remote_creation_failed(home, namespace, "web"), timeout=30,
                         message="RemoteCreationFailed condition")
    assert condition["status"] == "True" and condition["reason"] == "Forbidden"
    assert message in condition["message"]
    events = wait_for(lambda: home_events(home, namespace, "web", "RemoteCreationFailed"),
                      timeout=30, message="RemoteCreationFailed Event")
    assert events[0].type == "Warning" and message in events[0].message
    # The enforcer's next writes echo the same refusal: no second Event.
    report_shadow_status(remote, twin, "web", {"conditions": [refusal], "recreations": 0})
    # The pod exists: the enforcer's status has its podStatus and no refusal any more.
    report_shadow_status(remote, twin, "web", {**running_status("10.200.3.4"), "conditions": None})
    wait_for(lambda: read_pod(home, namespace, "web")["status"].get("phase") == "Running",
             timeout=30, message="home pod Running once the remote pod exists")
    assert remote_creation_failed(home, namespace, "web") is None
    assert len(home_events(home, namespace, "web", "RemoteCreationFailed")) == 1


def test_a_shadow_pod_of_another_peering_is_left_alone_and_reported(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_agent: Any) -> None:
    agent = start_agent()
    twin = extend(home, remote, agent, namespace)
    foreign = {"apiVersion": "offloading.liqo.io/v1beta1", "kind": "ShadowPod",
               "metadata": {"name": "web", "labels": {
                   "offloading.liqo.io/origin": "someone-else",
                   "offloading.liqo.io/destination": agent.remote_id}},
               "spec": {"pod": {"containers": [{"name": "theirs", "image": "busybox"}]}}}
    custom(remote).create_namespaced_custom_object("offloading.liqo.io", "v1beta1", twin,
                                                   "shadowpods", foreign)
    bound_pod(home, namespace, "web", agent.node_name)
    events = wait_for(lambda: home_events(home, namespace, "web", "FailedReflection"),
                      timeout=30, message="FailedReflection Event on the home pod")
    assert f"ShadowPod {twin}/web exists and is not this peering's" in events[0].message
    theirs = shadow_pod(remote, twin, "web")
    assert theirs["metadata"]["labels"]["offloading.liqo.io/origin"] == "someone-else"
    assert theirs["spec"]["pod"]["containers"][0]["name"] == "theirs"
