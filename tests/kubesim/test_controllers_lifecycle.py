"""Node lifecycle, namespace lifecycle and what every namespace gets."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from tests.helpers import wait_for
from tests.kubesim.test_controllers_cluster import pod_manifest, running


@contextmanager
def own_cluster(directory: Path, grace: float) -> Iterator[tuple[Any, client.CoreV1Api]]:
    """A cluster of its own (2 workers) whose nodes go stale after `grace` s without a sign."""
    from kubesim.cluster import Cluster, ClusterThread
    from kubesim.controllers import ControllerSettings

    sim = Cluster("quick", workers=2)
    sim.controller_settings = ControllerSettings(  # type: ignore[attr-defined]
        workers=2, node_prefix="quick", node_grace_period=grace, lease_renew_interval=0.2)
    with ClusterThread([sim], directory):
        api_client = config.new_client_from_config(
            config_file=str(directory / "quick.kubeconfig"))
        yield sim, client.CoreV1Api(api_client)
        api_client.close()


@pytest.fixture
def quick_cluster(tmp_path: Path) -> Iterator[tuple[Any, client.CoreV1Api]]:
    with own_cluster(tmp_path, grace=2.0) as cluster:
        yield cluster


@pytest.fixture
def patient_cluster(tmp_path: Path) -> Iterator[tuple[Any, client.CoreV1Api]]:
    with own_cluster(tmp_path, grace=60.0) as cluster:
        yield cluster


def ready_status(core: client.CoreV1Api, node: str) -> str:
    return str(next(c.status for c in core.read_node(node).status.conditions
                    if c.type == "Ready"))


def taint_keys(core: client.CoreV1Api, node: str) -> set[tuple[str, str]]:
    return {(t.key, t.effect) for t in core.read_node(node).spec.taints or []}


@pytest.mark.kubesim_only(reason="a simulated cluster of its own with a 2 s node grace period, "
                                 "whose kubelet heartbeats stop on demand")
def test_node_with_a_stale_lease_becomes_unknown_and_unreachable(quick_cluster) -> None:
    sim, core = quick_cluster
    wait_for(lambda: ready_status(core, "quick-1") == "True")
    sim.controllers.kubelet.stop_kubelet("quick-1")
    wait_for(lambda: ready_status(core, "quick-1") == "Unknown")
    wait_for(lambda: taint_keys(core, "quick-1") == {
        ("node.kubernetes.io/unreachable", "NoSchedule"),
        ("node.kubernetes.io/unreachable", "NoExecute")})
    ready = next(c for c in core.read_node("quick-1").status.conditions if c.type == "Ready")
    assert ready.reason == "NodeStatusUnknown"
    assert ready.message == "Kubelet stopped posting node status."
    assert ready_status(core, "quick-2") == "True"  # the other node keeps renewing
    # the scheduler no longer places pods on it
    for index in range(4):
        core.create_namespaced_pod("default", pod_manifest(f"spread-{index}"))
    for index in range(4):
        pod = wait_for(lambda i=index: running_anywhere(core, f"spread-{i}"))
        assert pod.spec.node_name == "quick-2"
    sim.controllers.kubelet.start_kubelet("quick-1")
    wait_for(lambda: ready_status(core, "quick-1") == "True")
    wait_for(lambda: not taint_keys(core, "quick-1"))


def running_anywhere(core: client.CoreV1Api, name: str) -> Any:
    pod = core.read_namespaced_pod(name, "default")
    return pod if pod.status.phase == "Running" else None


def test_every_namespace_gets_the_root_ca_and_the_default_service_account(home,
                                                                         namespace) -> None:
    configmap = wait_for(lambda: home.core.read_namespaced_config_map("kube-root-ca.crt",
                                                                      namespace))
    assert "BEGIN CERTIFICATE" in configmap.data["ca.crt"]
    wait_for(lambda: home.core.read_namespaced_service_account("default", namespace))
    home.core.delete_namespaced_config_map("kube-root-ca.crt", namespace)
    wait_for(lambda: home.core.read_namespaced_config_map("kube-root-ca.crt", namespace))


def test_root_ca_is_the_clusters_own(home, namespace) -> None:
    """The CA the namespace's ConfigMap hands to pods is the one the cluster's kubeconfig
    trusts (the CA signing the API server's certificate)."""
    configmap = wait_for(lambda: home.core.read_namespaced_config_map("kube-root-ca.crt",
                                                                      namespace))
    trusted = Path(home.api_client.configuration.ssl_ca_cert).read_text()
    assert configmap.data["ca.crt"].strip() == trusted.strip()


def test_terminating_namespace_is_emptied_then_removed(home) -> None:
    import uuid

    name = f"t-{uuid.uuid4().hex[:10]}"
    home.core.create_namespace({"metadata": {"name": name}})
    # a finalizer we hold keeps the namespace terminating until we let go
    home.core.create_namespaced_config_map(name, {"metadata": {
        "name": "held", "finalizers": ["example.com/hold"]}})
    home.core.create_namespaced_pod(name, pod_manifest("worker"))
    wait_for(lambda: running(home, name, "worker"), timeout=60)
    home.core.delete_namespace(name)
    terminating = home.core.read_namespace(name)
    assert terminating.status.phase == "Terminating"
    assert "kubernetes" in terminating.spec.finalizers
    with pytest.raises(ApiException) as refused:
        home.core.create_namespaced_config_map(name, {"metadata": {"name": "late"}})
    assert refused.value.status == 403

    def only_held_left() -> bool:
        pods = home.core.list_namespaced_pod(name).items
        configmaps = home.core.list_namespaced_config_map(name).items
        return not pods and [c.metadata.name for c in configmaps] == ["held"]

    wait_for(only_held_left, timeout=60)
    # the namespace controller says so at its next pass over the namespace
    remaining = wait_for(lambda: next(
        c for c in home.core.read_namespace(name).status.conditions or []
        if c.type == "NamespaceContentRemaining"), timeout=60,
        message="the NamespaceContentRemaining condition")
    assert remaining.status == "True"
    home.core.patch_namespaced_config_map("held", name, {"metadata": {"finalizers": None}})

    def gone() -> bool:
        try:
            home.core.read_namespace(name)
        except ApiException as error:
            return error.status == 404
        return False

    wait_for(gone, timeout=90)


@pytest.mark.kubesim_only(reason="a simulated cluster of its own whose containers ignore SIGTERM "
                                 "on demand")
def test_a_pod_whose_containers_do_not_stop_goes_after_its_grace_period(tmp_path: Path) -> None:
    from kubesim.cluster import Cluster, ClusterThread
    from kubesim.controllers import ControllerSettings

    sim = Cluster("stubborn")
    # containers that ignore SIGTERM: only the grace period ends them
    sim.controller_settings = ControllerSettings(  # type: ignore[attr-defined]
        node_prefix="stubborn", container_stop_delay=3600)
    with ClusterThread([sim], tmp_path):
        api_client = config.new_client_from_config(
            config_file=str(tmp_path / "stubborn.kubeconfig"))
        core = client.CoreV1Api(api_client)
        manifest = pod_manifest("slow")
        manifest["spec"]["terminationGracePeriodSeconds"] = 1
        core.create_namespaced_pod("default", manifest)
        wait_for(lambda: core.read_namespaced_pod("slow", "default").status.phase == "Running")
        core.delete_namespaced_pod("slow", "default")
        leaving = core.read_namespaced_pod("slow", "default")  # still there, terminating
        assert leaving.metadata.deletion_timestamp is not None
        assert leaving.metadata.deletion_grace_period_seconds == 1

        def gone() -> bool:
            try:
                core.read_namespaced_pod("slow", "default")
            except ApiException as error:
                return error.status == 404
            return False

        wait_for(gone, timeout=15)
        api_client.close()


@pytest.mark.kubesim_only(reason="a simulated cluster of its own with a 60 s node grace period, "
                                 "whose node reports NotReady on demand")
def test_node_reporting_not_ready_gets_the_not_ready_taints(patient_cluster) -> None:
    _, core = patient_cluster
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    core.create_node({"metadata": {"name": "virtual"}})

    def report(status: str) -> None:
        core.patch_node_status("virtual", {"status": {"conditions": [{
            "type": "Ready", "status": status, "reason": "Test", "message": "",
            "lastHeartbeatTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "lastTransitionTime": now}]}})

    report("False")
    wait_for(lambda: taint_keys(core, "virtual") == {
        ("node.kubernetes.io/not-ready", "NoSchedule"),
        ("node.kubernetes.io/not-ready", "NoExecute")})
    report("True")
    wait_for(lambda: not taint_keys(core, "virtual"))
