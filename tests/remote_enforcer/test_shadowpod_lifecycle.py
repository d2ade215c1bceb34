"""ShadowPods become pods that stay alive, with the enforcer running."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from shared.api.shadowpod import SHADOWPOD
from tests.finish import finish, finishing_container
from tests.helpers import wait_for
from tests.remote_enforcer.conftest import (
    ShadowPods,
    make_twin_namespace,
    new_name,
    room_for_pods,
    settled,
    shadowpod,
)
from tests.remote_enforcer.test_pod_policy import set_consumer_pod_policy

CONSUMER = "consumer-lifecycle"


def pod_or_none(remote: Any, namespace: str, name: str) -> Any:
    try:
        return remote.core.read_namespaced_pod(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


@pytest.fixture(scope="module", autouse=True)
def tenant(remote: Any, enforcer: Any) -> str:
    """The consumer's tenant namespace, with its Quota (room for the module's pods)."""
    return room_for_pods(remote, CONSUMER)


@pytest.fixture
def twin(remote: Any, enforcer: Any) -> str:
    return make_twin_namespace(remote, CONSUMER)


def test_a_shadowpod_becomes_an_owned_pod_whose_status_is_reported(
        remote: Any, twin: str, shadowpods: ShadowPods) -> None:
    name = new_name("web")
    created = shadowpods.create(twin, shadowpod(name, CONSUMER))

    pod = wait_for(lambda: pod_or_none(remote, twin, name), message="no pod")
    assert pod.metadata.labels["app"] == "demo"
    assert pod.metadata.annotations["note"] == "from home"
    [owner] = pod.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid, owner.controller) == (
        "ShadowPod", name, created["metadata"]["uid"], True)

    status = wait_for(lambda: (s := shadowpods.status(twin, name)).get("phase") == "Running"
                      and s, message="ShadowPod never reported Running")
    running = remote.core.read_namespaced_pod(name, twin)
    assert status["nodeName"] == running.spec.node_name
    assert status["podStatus"]["podIP"] == running.status.pod_ip
    assert status["podStatus"]["containerStatuses"][0]["name"] == "main"
    assert status.get("recreations", 0) == 0


def test_a_deleted_pod_is_recreated_and_counted(
        remote: Any, twin: str, shadowpods: ShadowPods) -> None:
    name = new_name("web")
    shadowpods.create(twin, shadowpod(name, CONSUMER))
    first = wait_for(lambda: shadowpods.status(twin, name).get("phase") == "Running"
                     and remote.core.read_namespaced_pod(name, twin))

    remote.core.delete_namespaced_pod(name, twin, grace_period_seconds=0)

    def replaced() -> Any:
        pod = pod_or_none(remote, twin, name)
        return pod is not None and pod.metadata.uid != first.metadata.uid and pod
    wait_for(replaced, message="the pod was not recreated")
    wait_for(lambda: shadowpods.status(twin, name).get("recreations") == 1,
             message="the recreation was not counted")


def test_label_annotation_image_and_toleration_changes_reach_the_pod(
        remote: Any, tenant: str, twin: str, shadowpods: ShadowPods) -> None:
    name = new_name("web")
    shadowpods.create(twin, shadowpod(name, CONSUMER))
    settled(shadowpods, twin, name)

    gpu = {"key": "gpu", "operator": "Exists"}
    set_consumer_pod_policy(remote, tenant, CONSUMER, allowedTolerations=[gpu])
    wait_for(lambda: shadowpods.patch(twin, name, {
        "metadata": {"labels": {"app": "demo-2"}, "annotations": {"note": None, "added": "yes"}},
        "spec": {"pod": {"containers": [{"name": "main", "image": "nginx:2"}],
                         "activeDeadlineSeconds": 3600, "tolerations": [gpu]}}}),
        message="the update was not admitted once the policy allowed its toleration")

    def updated() -> bool:
        pod = remote.core.read_namespaced_pod(name, twin)
        return (pod.metadata.labels["app"] == "demo-2"
                and pod.metadata.annotations.get("added") == "yes"
                and "note" not in pod.metadata.annotations
                and pod.spec.containers[0].image == "nginx:2"
                and pod.spec.active_deadline_seconds == 3600
                and any(t.key == "gpu" for t in pod.spec.tolerations or []))
    wait_for(updated, message="the pod did not follow its ShadowPod")


def completed(remote: Any, shadowpods: ShadowPods, twin: str) -> tuple[str, Any]:
    """A ShadowPod whose pod ran to completion, with Succeeded recorded."""
    name = new_name("job")
    shadowpods.create(twin, shadowpod(name, CONSUMER, {
        "restartPolicy": "Never", "containers": [finishing_container()]}))
    wait_for(lambda: shadowpods.status(twin, name).get("phase") == "Running", timeout=30)
    finish(remote.core, twin, name)
    wait_for(lambda: shadowpods.status(twin, name).get("phase") == "Succeeded", timeout=30,
             message="Succeeded was not reported")
    return name, remote.core.read_namespaced_pod(name, twin)


def test_shadowpods_deleted_as_soon_as_made_leave_no_pod_behind(
        remote: Any, twin: str, shadowpods: ShadowPods) -> None:
    # The enforcer makes a first pod from its cache: a ShadowPod deleted before the cache saw
    # it may get one, which its controller reference has the garbage collector remove.
    names = [new_name("brief") for _ in range(10)]
    for name in names:
        shadowpods.create(twin, shadowpod(name, CONSUMER))
        shadowpods.api.delete_namespaced_custom_object(
            SHADOWPOD.group, SHADOWPOD.version, twin, SHADOWPOD.plural, name)
    marker = new_name("marker")
    shadowpods.create(twin, shadowpod(marker, CONSUMER))
    settled(shadowpods, twin, marker)  # the events before the marker's are handled

    wait_for(lambda: all(pod_or_none(remote, twin, name) is None for name in names),
             message="a pod outlived its ShadowPod")


def test_a_completed_pod_is_never_recreated_even_after_a_restart_and_an_update(
        remote: Any, twin: str, shadowpods: ShadowPods, enforcer: Any) -> None:
    name, pod = completed(remote, shadowpods, twin)

    remote.core.delete_namespaced_pod(name, twin, grace_period_seconds=0)
    wait_for(lambda: pod_or_none(remote, twin, name) is None)
    enforcer.restart()
    shadowpods.patch(twin, name, {"metadata": {"labels": {"touched": "after-restart"}}})
    # A marker ShadowPod created after the update: once its pod exists, the enforcer has
    # handled the events before it, and the completed one must still have no pod.
    marker = new_name("marker")
    shadowpods.create(twin, shadowpod(marker, CONSUMER))
    wait_for(lambda: shadowpods.status(twin, marker).get("phase") == "Running")
    wait_for(lambda: shadowpods.get(twin, name)["metadata"]["labels"].get("touched"))

    assert pod_or_none(remote, twin, name) is None
    status = shadowpods.status(twin, name)
    assert status["phase"] == "Succeeded"
    assert status.get("recreations", 0) == 0


def test_a_failed_pod_keeps_its_failed_phase(
        remote: Any, twin: str, shadowpods: ShadowPods) -> None:
    name = new_name("job")
    shadowpods.create(twin, shadowpod(name, CONSUMER, {
        "restartPolicy": "Never", "containers": [finishing_container(exit_code=1)]}))
    wait_for(lambda: shadowpods.status(twin, name).get("phase") == "Running", timeout=30)
    finish(remote.core, twin, name)
    settled(shadowpods, twin, name, "Failed")
    shadowpods.patch(twin, name, {"metadata": {"annotations": {"touched": "yes"}}})
    wait_for(lambda: remote.core.read_namespaced_pod(name, twin).metadata.annotations.get(
        "touched") == "yes")
    assert shadowpods.status(twin, name)["phase"] == "Failed"


def warnings_about(remote: Any, namespace: str, name: str) -> list[Any]:
    return [e for e in remote.core.list_namespaced_event(namespace).items
            if e.involved_object.name == name and e.involved_object.kind == "ShadowPod"
            and e.type == "Warning"]


def test_a_pod_that_is_not_ours_is_left_alone_and_reported(
        remote: Any, twin: str, shadowpods: ShadowPods) -> None:
    name = new_name("taken")
    remote.core.create_namespaced_pod(twin, {"metadata": {"name": name, "labels": {"own": "y"}},
                                             "spec": {"containers": [{"name": "c",
                                                                      "image": "redis"}]}})
    shadowpods.create(twin, shadowpod(name, CONSUMER))

    [warning] = wait_for(lambda: warnings_about(remote, twin, name))
    assert warning.reason == "FailedReflection"
    assert warning.message == f"pod {twin}/{name} exists and is not controlled by this ShadowPod"
    pod = remote.core.read_namespaced_pod(name, twin)
    assert pod.metadata.labels == {"own": "y"} and not pod.metadata.owner_references
    assert pod.spec.containers[0].image == "redis"


def test_a_pod_the_cluster_refuses_is_reported_on_the_shadowpod(
        remote: Any, twin: str, shadowpods: ShadowPods) -> None:
    name = new_name("bad")
    shadowpods.create(twin, shadowpod(name, CONSUMER, {"containers": []}))
    [warning] = wait_for(lambda: warnings_about(remote, twin, name))
    assert warning.reason == "FailedCreate"
    assert warning.message == (
        f'cannot create the pod: Pod "{name}" is invalid: spec.containers: Required value')
