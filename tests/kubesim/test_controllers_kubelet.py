"""The kubelet stand-in's test hooks: container exits under each restartPolicy, readiness, logs."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import wait_for
from tests.kubesim.test_controllers_cluster import phase_is, pod_manifest, running

pytestmark = pytest.mark.kubesim_only(reason="kubesim's kubelet hooks (complete, fail, restart, "
                                             "set_ready, write_log) and its pod CIDR")


def start(home: Any, namespace: str, name: str, **spec: Any) -> Any:
    home.core.create_namespaced_pod(namespace, pod_manifest(name, **spec))
    return wait_for(lambda: running(home, namespace, name), timeout=30)


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


def test_containers_that_ignore_sigterm_keep_the_pod_for_its_grace_period(home,
                                                                          namespace) -> None:
    start(home, namespace, "stubborn", terminationGracePeriodSeconds=600)
    home.sim.controllers.kubelet.ignore_sigterm(namespace, "stubborn")
    home.core.delete_namespaced_pod("stubborn", namespace)
    wait_for(lambda: any(e.reason == "Killing" for e in home.core.list_namespaced_event(
        namespace, field_selector="involvedObject.name=stubborn").items), timeout=30,
        message="the kubelet is stopping the pod")
    # the containers did not stop on SIGTERM: the pod is still there, terminating
    assert home.core.read_namespaced_pod("stubborn", namespace).metadata.deletion_timestamp
    home.core.delete_namespaced_pod("stubborn", namespace, grace_period_seconds=1)

    def gone() -> bool:
        return not home.core.list_namespaced_pod(
            namespace, field_selector="metadata.name=stubborn").items

    wait_for(gone, timeout=30, message="gone once the shortened grace period ended")


def test_pod_logs_are_served(home, namespace) -> None:
    start(home, namespace, "chatty")
    home.sim.controllers.kubelet.write_log(namespace, "chatty", "one\ntwo\nthree\n")
    assert home.core.read_namespaced_pod_log("chatty", namespace) == "one\ntwo\nthree\n"
    assert home.core.read_namespaced_pod_log("chatty", namespace, tail_lines=1) == "three\n"


def test_restart_back_off_doubles_from_its_base_up_to_its_cap() -> None:
    from kubesim.controllers.kubelet import RestartBackOff, go_duration

    backoff, waits = RestartBackOff(10.0, 300.0), []
    for exit_time in range(0, 700, 100):  # each run ends before the back-off is forgotten
        backoff.next(float(exit_time))
        waits.append(go_duration(backoff.backoff))
    assert waits == ["10s", "20s", "40s", "1m20s", "2m40s", "5m0s", "5m0s"]
    assert backoff.in_backoff_since(600.0, now=899.0)
    assert not backoff.in_backoff_since(600.0, now=900.0)
    assert not backoff.in_backoff_since(1201.0, now=1201.0)  # quiet for 2 x cap: forgotten
    assert go_duration(0.4) == "400ms" and go_duration(1.6) == "1.6s"


def test_a_container_that_keeps_failing_goes_into_crash_loop_back_off(tmp_path) -> None:
    from kubernetes import client, config

    from kubesim.cluster import Cluster, ClusterThread
    from kubesim.controllers import ControllerSettings

    sim = Cluster("crashing", workers=1)
    sim.controller_settings = ControllerSettings(  # type: ignore[attr-defined]
        workers=1, node_prefix="crashing", restart_backoff_base=1.0, restart_backoff_max=4.0)
    with ClusterThread([sim], tmp_path):
        api_client = config.new_client_from_config(
            config_file=str(tmp_path / "crashing.kubeconfig"))
        core = client.CoreV1Api(api_client)
        kubelet = sim.controllers.kubelet
        wait_for(lambda: core.read_namespaced_service_account("default", "default"))
        core.create_namespaced_pod("default", pod_manifest("crashy"))

        def container(running: bool | None = None, restarts: int | None = None) -> Any:
            pod = core.read_namespaced_pod("crashy", "default")
            status = (pod.status.container_statuses or [None])[0]
            if status is None or (restarts is not None and status.restart_count != restarts):
                return None
            if running is not None and (status.state.running is not None) != running:
                return None
            return pod

        uid = wait_for(lambda: container(running=True, restarts=0)).metadata.uid
        kubelet.fail("default", "crashy")  # the first exit is restarted at once
        wait_for(lambda: container(running=True, restarts=1))
        for restarts, wait in ((1, "1s"), (2, "2s")):
            kubelet.fail("default", "crashy", exit_code=3)
            pod = wait_for(lambda r=restarts: container(running=False, restarts=r))
            status = pod.status.container_statuses[0]
            assert status.state.waiting.reason == "CrashLoopBackOff"
            assert status.state.waiting.message == (
                f"back-off {wait} restarting failed container=app pod=crashy_default({uid})")
            assert status.last_state.terminated.exit_code == 3
            assert (status.ready, status.started, pod.status.phase) == (False, False, "Running")
            wait_for(lambda r=restarts: container(running=True, restarts=r + 1), timeout=10)
        events = core.list_namespaced_event(
            "default", field_selector="involvedObject.name=crashy,reason=BackOff").items
        assert {(e.type, e.message) for e in events} == {
            ("Warning", f"Back-off restarting failed container app in pod crashy_default({uid})")}
        api_client.close()


def test_an_environment_fails_at_the_first_missing_object_or_key_init_containers_first(
) -> None:
    from kubesim.controllers.kubelet import environment_error

    objects: dict[tuple[str, str], dict[str, Any]] = {
        ("configmap", "settings"): {"data": {"mode": "blue"}},
        ("secret", "credentials"): {"binaryData": {"password": "cw=="}}}

    def error(*containers: dict[str, Any], init: Any = ()) -> str | None:
        pod = {"metadata": {"namespace": "app"},
               "spec": {"initContainers": list(init), "containers": list(containers)}}
        return environment_error(pod, lambda kind, name: objects.get((kind, name)))

    def key(kind: str, name: str, key: str, **ref: Any) -> dict[str, Any]:
        return {"name": key.upper(), "valueFrom": {kind: {"name": name, "key": key, **ref}}}

    fine = {"name": "fine", "env": [key("configMapKeyRef", "settings", "mode"),
                                    key("secretKeyRef", "credentials", "password"),
                                    key("configMapKeyRef", "absent", "x", optional=True),
                                    {"name": "PLAIN", "value": "v"}],
            "envFrom": [{"configMapRef": {"name": "settings"}},
                        {"secretRef": {"name": "absent", "optional": True}}]}
    assert error(fine) is None
    assert error(fine, {"name": "other", "env": [key("configMapKeyRef", "settings", "size")]}
                 ) == "couldn't find key size in ConfigMap app/settings"
    assert error({"name": "reads", "env": [key("secretKeyRef", "gone", "k")],
                  "envFrom": [{"configMapRef": {"name": "missing"}}]}
                 ) == 'configmap "missing" not found'  # envFrom is read first
    assert error(fine, init=[{"name": "migrate", "env": [key("secretKeyRef", "db", "k")]}]
                 ) == 'secret "db" not found'


def test_volumes_that_cannot_mount_are_those_missing_a_required_secret_or_configmap() -> None:
    from kubesim.controllers.kubelet import unmounted_volumes

    present = {("secret", "here"), ("configmap", "kube-root-ca.crt")}
    pod = {"spec": {"volumes": [
        {"name": "ok", "secret": {"secretName": "here"}},
        {"name": "gone", "secret": {"secretName": "missing"}},
        {"name": "maybe", "configMap": {"name": "missing", "optional": True}},
        {"name": "cfg", "configMap": {"name": "settings"}},
        {"name": "api", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt"}},
            {"secret": {"name": "one"}}, {"configMap": {"name": "two"}}]}},
        {"name": "scratch", "emptyDir": {}}]}}
    assert unmounted_volumes(pod, lambda kind, name: (kind, name) in present) == [
        ("gone", 'secret "missing" not found'),
        ("cfg", 'configmap "settings" not found'),
        ("api", '[secret "one" not found, configmap "two" not found]')]
