"""The pods' ephemeralcontainers subresource, as `kubectl debug` uses it (also on real
clusters): a container added to a running pod, run once by its kubelet and reported in
ephemeralContainerStatuses; never changed or removed once added, never set on create or through
a plain pod update, without the fields fundamental pod services use."""

from __future__ import annotations

from typing import Any

from tests import helpers
from tests.helpers import wait_for
from tests.kubesim.test_controllers_cluster import pod_manifest, running

DEBUGGER = {"name": "debugger", "image": "busybox:1.36", "command": ["echo", "debugging"],
            "targetContainerName": "app"}


def debug(home: Any, namespace: str, name: str, *containers: dict[str, Any]) -> Any:
    """kubectl debug's request: a strategic merge patch of the subresource."""
    return home.core.patch_namespaced_pod_ephemeralcontainers(
        name, namespace, {"spec": {"ephemeralContainers": list(containers)}})


def refusal(call: Any) -> str:
    return helpers.refusal(call, 422)


def test_an_ephemeral_container_is_added_run_and_reported(home: Any, namespace: str) -> None:
    home.core.create_namespaced_pod(namespace, pod_manifest("target"))
    before = wait_for(lambda: running(home, namespace, "target"), timeout=60)
    answer = debug(home, namespace, "target", DEBUGGER)
    assert [c.name for c in answer.spec.ephemeral_containers] == ["debugger"]
    assert answer.spec.containers[0].name == "app"  # the rest of the pod as it was

    def reported() -> Any:
        pod = home.core.read_namespaced_pod("target", namespace)
        statuses = pod.status.ephemeral_container_statuses or []
        return statuses[0] if statuses and statuses[0].state.running or (
            statuses and statuses[0].state.terminated) else None

    status = wait_for(reported, timeout=60, message="the ephemeral container reported")
    assert status.name == "debugger" and status.ready is False
    assert "debugging" in wait_for(lambda: home.core.read_namespaced_pod_log(
        "target", namespace, container="debugger"), timeout=30, message="its log")
    after = home.core.read_namespaced_pod("target", namespace)
    assert after.status.phase == "Running"
    assert [c.name for c in after.status.container_statuses] == ["app"]
    assert (after.metadata.generation or 0) >= (before.metadata.generation or 0)
    read = home.core.read_namespaced_pod_ephemeralcontainers("target", namespace)
    assert [c.name for c in read.spec.ephemeral_containers] == ["debugger"]


def test_what_an_ephemeral_container_may_not_do(home: Any, namespace: str) -> None:
    home.core.create_namespaced_pod(namespace, pod_manifest("target"))
    wait_for(lambda: running(home, namespace, "target"), timeout=60)
    debug(home, namespace, "target", DEBUGGER)

    changed = refusal(lambda: debug(home, namespace, "target",
                                    {**DEBUGGER, "image": "busybox:1.37"}))
    assert 'existing ephemeral containers "debugger" may not be changed' in changed
    # Without a resourceVersion (pods take unconditional updates): the kubelet reporting the
    # debugger meanwhile would make it a 409 instead.
    current = home.api_client.sanitize_for_serialization(
        home.core.read_namespaced_pod("target", namespace))
    current["metadata"].pop("resourceVersion")
    removed = refusal(lambda: home.core.replace_namespaced_pod_ephemeralcontainers(
        "target", namespace, {**current, "spec": {**current["spec"], "ephemeralContainers": []}}))
    assert 'existing ephemeral containers "debugger" may not be removed' in removed
    ports = refusal(lambda: debug(home, namespace, "target", DEBUGGER, {
        "name": "listener", "image": "busybox:1.36", "ports": [{"containerPort": 80}]}))
    assert ("spec.ephemeralContainers[1].ports: Forbidden: cannot be set for an Ephemeral "
            "Container") in ports
    same_name = refusal(lambda: debug(home, namespace, "target", DEBUGGER,
                                      {"name": "app", "image": "busybox:1.36"}))
    assert 'spec.ephemeralContainers[1].name: Duplicate value: "app"' in same_name
    through_update = refusal(lambda: home.core.patch_namespaced_pod("target", namespace, {
        "spec": {"ephemeralContainers": [DEBUGGER, {"name": "other", "image": "busybox"}]}}))
    assert "pod updates may not change fields" in through_update
    on_create = refusal(lambda: home.core.create_namespaced_pod(namespace, pod_manifest(
        "born-debugged", ephemeralContainers=[DEBUGGER])))
    assert "spec.ephemeralContainers: Forbidden: cannot be set on create" in on_create
