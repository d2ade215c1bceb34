"""The kubelet stand-in's test hooks: container exits under each restartPolicy, readiness, logs."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import wait_for
from tests.kubesim.test_controllers_cluster import pod_manifest, running

pytestmark = pytest.mark.kubesim_only


def start(home: Any, namespace: str, name: str, **spec: Any) -> Any:
    home.core.create_namespaced_pod(namespace, pod_manifest(name, **spec))
    return wait_for(lambda: running(home, namespace, name), timeout=30)


def phase_is(home: Any, namespace: str, name: str, phase: str) -> Any:
    pod = home.core.read_namespaced_pod(name, namespace)
    return pod if pod.status.phase == phase else None


def test_pod_ip_comes_from_the_clusters_pod_cidr(home, namespace) -> None:
    import ipaddress

    pod = start(home, namespace, "addressed")
    assert ipaddress.ip_address(pod.status.pod_ip) in ipaddress.ip_network(home.sim.pod_cidr)


def test_failed_container_is_restarted_under_always(home, namespace) -> None:
    start(home, namespace, "always")
    home.sim.controllers.kubelet.fail(namespace, "always", exit_code=2)

    def restarted() -> Any:
        pod = running(home, namespace, "always")
        return pod if pod and pod.status.container_statuses[0].restart_count == 1 else None

    status = wait_for(restarted).status.container_statuses[0]
    assert status.last_state.terminated.exit_code == 2
    assert status.last_state.terminated.reason == "Error"


def test_failed_container_ends_the_pod_under_never(home, namespace) -> None:
    start(home, namespace, "never", restartPolicy="Never")
    home.sim.controllers.kubelet.fail(namespace, "never")
    pod = wait_for(lambda: phase_is(home, namespace, "never", "Failed"))
    status = pod.status.container_statuses[0]
    assert status.state.terminated.exit_code == 1 and not status.ready
    assert next(c for c in pod.status.conditions if c.type == "Ready").status == "False"


def test_completed_container_succeeds_under_on_failure(home, namespace) -> None:
    start(home, namespace, "job", restartPolicy="OnFailure")
    home.sim.controllers.kubelet.complete(namespace, "job")
    pod = wait_for(lambda: phase_is(home, namespace, "job", "Succeeded"))
    assert pod.status.container_statuses[0].state.terminated.reason == "Completed"


def test_restart_and_readiness_hooks(home, namespace) -> None:
    start(home, namespace, "flappy")
    kubelet = home.sim.controllers.kubelet
    kubelet.set_ready(namespace, "flappy", False)

    def ready_is(value: str) -> Any:
        pod = home.core.read_namespaced_pod("flappy", namespace)
        return next(c for c in pod.status.conditions if c.type == "Ready").status == value

    wait_for(lambda: ready_is("False"))
    kubelet.set_ready(namespace, "flappy", True)
    wait_for(lambda: ready_is("True"))
    kubelet.restart(namespace, "flappy")
    wait_for(lambda: home.core.read_namespaced_pod("flappy", namespace)
             .status.container_statuses[0].restart_count == 1)


def test_pod_logs_are_served(home, namespace) -> None:
    start(home, namespace, "chatty")
    home.sim.controllers.kubelet.write_log(namespace, "chatty", "one\ntwo\nthree\n")
    assert home.core.read_namespaced_pod_log("chatty", namespace) == "one\ntwo\nthree\n"
    assert home.core.read_namespaced_pod_log("chatty", namespace, tail_lines=1) == "three\n"
