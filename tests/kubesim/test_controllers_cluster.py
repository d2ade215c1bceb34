"""Scheduler, kubelet and node registration, seen through the API (also on real clusters)."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.helpers import wait_for


def pod_manifest(name: str, **spec: Any) -> dict[str, Any]:
    container = {"name": "app", "image": "registry.k8s.io/pause:3.9"}
    container.update(spec.pop("container", {}))
    return {"metadata": {"name": name, "labels": {"app": name}},
            "spec": {"containers": [container], "terminationGracePeriodSeconds": 1, **spec}}


def condition(pod: Any, kind: str) -> Any:
    return next((c for c in pod.status.conditions or [] if c.type == kind), None)


def running(home: Any, namespace: str, name: str) -> Any:
    pod = home.core.read_namespaced_pod(name, namespace)
    return pod if pod.status.phase == "Running" else None


def test_every_node_is_registered_ready_with_a_fresh_lease(home) -> None:
    nodes = home.core.list_node().items
    assert nodes
    coordination = client.CoordinationV1Api(home.api_client)
    leases = {lease.metadata.name: lease for lease in
              coordination.list_namespaced_lease("kube-node-lease").items}
    for node in nodes:
        ready = next(c for c in node.status.conditions if c.type == "Ready")
        assert ready.status == "True"
        assert node.status.allocatable["cpu"] and node.status.allocatable["pods"]
        lease = leases[node.metadata.name]
        age = datetime.now(UTC) - lease.spec.renew_time
        assert age.total_seconds() < lease.spec.lease_duration_seconds


def test_pending_pod_is_bound_and_started(home, namespace) -> None:
    home.core.create_namespaced_pod(namespace, pod_manifest("web"))
    pod = wait_for(lambda: running(home, namespace, "web"), timeout=60)
    assert pod.spec.node_name
    assert pod.status.pod_ip and pod.status.host_ip and pod.status.start_time
    for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready"):
        assert condition(pod, kind).status == "True", kind
    [status] = pod.status.container_statuses
    assert status.name == "app" and status.ready and status.state.running is not None
    assert status.restart_count == 0 and status.container_id


def test_pod_that_fits_nowhere_is_unschedulable_with_the_schedulers_message(home,
                                                                           namespace) -> None:
    label = f"absent-{uuid.uuid4().hex[:6]}"
    home.core.create_namespaced_pod(namespace, pod_manifest("picky", nodeSelector={label: "x"}))
    home.core.create_namespaced_pod(namespace, pod_manifest(
        "greedy", container={"resources": {"requests": {"cpu": "100000"}}}))

    def unschedulable(name: str) -> Any:
        found = condition(home.core.read_namespaced_pod(name, namespace), "PodScheduled")
        return found if found is not None and found.reason == "Unschedulable" else None

    picky = wait_for(lambda: unschedulable("picky"), timeout=60)
    assert picky.status == "False"
    assert re.match(r"0/\d+ nodes are available: .*node\(s\) didn't match Pod's node "
                    r"affinity/selector", picky.message), picky.message
    greedy = wait_for(lambda: unschedulable("greedy"), timeout=60)
    assert "Insufficient cpu" in greedy.message
    assert home.core.read_namespaced_pod("picky", namespace).spec.node_name is None


def test_deleted_pod_goes_after_its_containers_stop(home, namespace) -> None:
    home.core.create_namespaced_pod(namespace, pod_manifest("short"))
    wait_for(lambda: running(home, namespace, "short"), timeout=60)
    home.core.delete_namespaced_pod("short", namespace)

    def gone() -> bool:
        try:
            home.core.read_namespaced_pod("short", namespace)
        except ApiException as error:
            return error.status == 404
        return False

    wait_for(gone, timeout=60)


def exits(command: str) -> dict[str, Any]:
    return {"name": "app", "image": "busybox:1.36", "command": ["sh", "-c", command]}


def phase_is(home: Any, namespace: str, name: str, phase: str) -> Any:
    pod = home.core.read_namespaced_pod(name, namespace)
    return pod if pod.status.phase == phase else None


def test_a_container_ends_when_its_command_does_with_its_exit_code(home, namespace) -> None:
    home.core.create_namespaced_pod(namespace, pod_manifest(
        "failing", restartPolicy="Never", container=exits("echo bye; exit 3")))
    home.core.create_namespaced_pod(namespace, pod_manifest(
        "job", restartPolicy="OnFailure", container=exits("echo done")))
    failed = wait_for(lambda: phase_is(home, namespace, "failing", "Failed"), timeout=60,
                      message="the pod failed with its container")
    [status] = failed.status.container_statuses
    assert (status.state.terminated.exit_code, status.state.terminated.reason) == (3, "Error")
    assert home.core.read_namespaced_pod_log("failing", namespace) == "bye\n"
    done = wait_for(lambda: phase_is(home, namespace, "job", "Succeeded"), timeout=60,
                    message="the pod succeeded with its container")
    [status] = done.status.container_statuses
    assert (status.state.terminated.exit_code, status.restart_count) == (0, 0)


def test_a_container_whose_command_ends_runs_it_again_under_always(home, namespace) -> None:
    home.core.create_namespaced_pod(namespace, pod_manifest(
        "again", container=exits("echo run; exit 2")))

    def restarted() -> Any:
        pod = home.core.read_namespaced_pod("again", namespace)
        statuses = pod.status.container_statuses or []
        return statuses[0] if statuses and statuses[0].restart_count >= 1 else None

    status = wait_for(restarted, timeout=60, message="the container restarted")
    assert status.last_state.terminated.exit_code == 2
    # the command ran again: its line is in the log of the run that ended last
    wait_for(lambda: home.core.read_namespaced_pod_log("again", namespace, previous=True)
             == "run\n", timeout=60, message="the previous run's log")


def test_scheduler_and_kubelet_record_events_about_the_pod(home, namespace) -> None:
    home.core.create_namespaced_pod(namespace, pod_manifest("noted"))
    wait_for(lambda: running(home, namespace, "noted"), timeout=60)

    def reasons() -> set[str]:
        events = home.core.list_namespaced_event(
            namespace, field_selector="involvedObject.name=noted").items
        return {event.reason for event in events}

    wait_for(lambda: {"Scheduled", "Started"} <= reasons(), timeout=60)


def test_a_pod_waits_in_create_container_config_error_until_its_environment_resolves(
        home, namespace) -> None:
    """A container's environment reads a ConfigMap that does not exist, then one without the
    key: CreateContainerConfigError with a Failed Event each, the pod synced again after the
    kubelet's backOffPeriod; once the key is there the pod runs."""
    env = [{"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "late", "key": "mode"}}},
           {"name": "MAYBE", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "k",
                                                            "optional": True}}}]
    home.core.create_namespaced_pod(namespace, pod_manifest("configured",
                                                            container={"env": env}))

    def config_error() -> Any:
        pod = home.core.read_namespaced_pod("configured", namespace)
        statuses = pod.status.container_statuses or []
        waiting = [s.state.waiting for s in statuses if s.state.waiting is not None]
        return waiting[0] if waiting and waiting[0].reason == "CreateContainerConfigError" \
            else None

    def failed() -> list[str]:
        return sorted(e.message for e in home.core.list_namespaced_event(namespace).items
                      if e.reason == "Failed" and e.involved_object.name == "configured")

    assert wait_for(config_error, timeout=60).message == 'configmap "late" not found'
    pod = home.core.read_namespaced_pod("configured", namespace)
    assert pod.status.phase == "Pending" and pod.status.pod_ip  # in its sandbox
    sandbox_ip = pod.status.pod_ip
    wait_for(lambda: failed() == ['Error: configmap "late" not found'], timeout=60)
    home.core.create_namespaced_config_map(namespace, {"metadata": {"name": "late"},
                                                       "data": {"other": "x"}})
    wait_for(lambda: len(failed()) == 2, timeout=60, message="the next sync's error")
    assert f"Error: couldn't find key mode in ConfigMap {namespace}/late" in failed()
    home.core.patch_namespaced_config_map("late", namespace, {"data": {"mode": "blue"}})
    pod = wait_for(lambda: running(home, namespace, "configured"), timeout=60)
    assert pod.status.pod_ip == sandbox_ip  # the containers start in that sandbox


def test_a_pod_waits_in_container_creating_until_the_secret_it_mounts_exists(home,
                                                                             namespace) -> None:
    """The volume manager: no Secret, no mount, FailedMount; once it exists (and the mount's
    backoff is over) the pod runs. The projected ConfigMap is optional: never waited for."""
    volumes = [{"name": "token", "secret": {"secretName": "late"}},
               {"name": "extra", "projected": {"sources": [
                   {"configMap": {"name": "absent", "optional": True}}]}}]
    home.core.create_namespaced_pod(namespace, pod_manifest("mounting", volumes=volumes))

    def creating() -> Any:
        pod = home.core.read_namespaced_pod("mounting", namespace)
        statuses = pod.status.container_statuses or []
        waiting = [s.state.waiting for s in statuses if s.state.waiting is not None]
        return pod if waiting and waiting[0].reason == "ContainerCreating" else None

    pod = wait_for(creating, timeout=60)
    assert pod.status.phase == "Pending" and not pod.status.pod_ip
    assert condition(pod, "Ready").status == "False"

    def failed_mount() -> Any:
        return [e for e in home.core.list_namespaced_event(namespace).items
                if e.reason == "FailedMount" and e.involved_object.name == "mounting"]

    [event, *_] = wait_for(failed_mount, timeout=60)
    assert event.type == "Warning" and event.source.component == "kubelet"
    assert event.message == 'MountVolume.SetUp failed for volume "token" : secret "late" not found'
    home.core.create_namespaced_secret(namespace, {"metadata": {"name": "late"},
                                                   "stringData": {"token": "t"}})
    pod = wait_for(lambda: running(home, namespace, "mounting"), timeout=150)
    assert pod.status.start_time
