"""Pod garbage collection (kube-controller-manager's pod-garbage-collector-controller): pods
bound to a node that does not exist, terminating pods never scheduled or on an out-of-service
node, and terminated pods beyond the threshold are failed and deleted."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from tests.helpers import wait_for
from tests.kubesim.test_controllers_cluster import condition, pod_manifest
from tests.kubesim.version import at_least

HOLD = "example.com/hold"
"""A finalizer of the test's: a deleted pod stays to be looked at, terminating."""
UNSCHEDULABLE = {"nodeSelector": {"example.com/no-such-label": "anywhere"}}


def gone(core: client.CoreV1Api, namespace: str, name: str) -> bool:
    try:
        core.read_namespaced_pod(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return True
        raise
    return False


def terminating(core: client.CoreV1Api, namespace: str, name: str) -> Any:
    pod = core.read_namespaced_pod(name, namespace)
    return pod if pod.metadata.deletion_timestamp is not None else None


def release(core: client.CoreV1Api, namespace: str, *names: str) -> None:
    for name in names:
        try:
            core.patch_namespaced_pod(name, namespace, {"metadata": {"finalizers": None}})
        except ApiException as error:
            if error.status != 404:
                raise


def held(name: str, **spec: Any) -> dict[str, Any]:
    manifest = pod_manifest(name, **spec)
    manifest["metadata"]["finalizers"] = [HOLD]
    return manifest


def test_a_pod_bound_to_a_node_that_does_not_exist_is_failed_and_deleted(home,
                                                                         namespace) -> None:
    """On every cluster, at kube-controller-manager's own pace: the node is looked up again
    after 40 s of quarantine, and passes come every 20 s."""
    core = home.core
    core.create_namespaced_pod(namespace, held("stray", nodeName=f"gone-{uuid.uuid4().hex[:8]}"))
    try:
        pod = wait_for(lambda: terminating(core, namespace, "stray"), timeout=120,
                       message="the orphaned pod was not deleted")
        if at_least(home, (1, 26)):  # marked Failed first, with the disruption condition
            assert pod.status.phase == "Failed"
            target = condition(pod, "DisruptionTarget")
            assert (target.status, target.reason, target.message) == (
                "True", "DeletionByPodGC", "PodGC: node no longer exists")
    finally:
        release(core, namespace, "stray")
    wait_for(lambda: gone(core, namespace, "stray"))


# ---------------------------------------------------------------- the rules, quickly (kubesim)

@pytest.fixture
def quick_gc(tmp_path: Path) -> Iterator[tuple[Any, client.CoreV1Api]]:
    """A cluster of its own whose pod garbage collector passes every 0.1 s, quarantines a
    missing node for 1 s and keeps 3 terminated pods."""
    from kubesim.cluster import Cluster, ClusterThread
    from kubesim.controllers import ControllerSettings

    sim = Cluster("gc", workers=1)
    sim.controller_settings = ControllerSettings(  # type: ignore[attr-defined]
        workers=1, node_prefix="gc", pod_gc_check_period=0.1, pod_gc_quarantine=1.0,
        terminated_pod_gc_threshold=3)
    with ClusterThread([sim], tmp_path):
        api_client = config.new_client_from_config(config_file=str(tmp_path / "gc.kubeconfig"))
        core = client.CoreV1Api(api_client)
        wait_for(lambda: core.read_namespaced_service_account("default", "default"))
        yield sim, core
        api_client.close()


@pytest.mark.kubesim_only(reason="a simulated cluster of its own whose pod garbage collector "
                                 "passes every 0.1 s")
def test_a_node_registered_within_the_quarantine_keeps_its_pods(quick_gc) -> None:
    _, core = quick_gc
    core.create_namespaced_pod("default", held("orphan", nodeName="never-registered"))
    core.create_namespaced_pod("default", held("early", nodeName="late-node"))
    core.create_node({"metadata": {"name": "late-node"}})
    try:
        wait_for(lambda: terminating(core, "default", "orphan"))
        # the late node's quarantine began no earlier than the orphan's, which is over
        early = core.read_namespaced_pod("early", "default")
        assert early.metadata.deletion_timestamp is None
        assert early.status.phase != "Failed"
    finally:
        release(core, "default", "orphan", "early")


@pytest.mark.kubesim_only(reason="a simulated cluster of its own whose pod garbage collector "
                                 "passes every 0.1 s")
def test_a_terminating_pod_never_scheduled_is_failed_and_deleted(quick_gc) -> None:
    _, core = quick_gc
    core.create_namespaced_pod("default", held("unscheduled", **UNSCHEDULABLE))
    core.delete_namespaced_pod("unscheduled", "default", grace_period_seconds=30)
    try:
        pod = wait_for(lambda: core.read_namespaced_pod("unscheduled", "default").status.phase
                       == "Failed" and core.read_namespaced_pod("unscheduled", "default"))
        assert condition(pod, "DisruptionTarget") is None  # only orphans carry it
    finally:
        release(core, "default", "unscheduled")
    wait_for(lambda: gone(core, "default", "unscheduled"))


@pytest.mark.kubesim_only(reason="a simulated cluster of its own whose pod garbage collector "
                                 "passes every 0.1 s")
def test_terminating_pods_of_an_out_of_service_node_are_deleted(quick_gc) -> None:
    """A node without a kubelet is not Ready: its terminating pods wait for a kubelet that
    never comes, until the node is tainted out of service."""
    _, core = quick_gc
    core.create_node({"metadata": {"name": "shut-down"}})
    core.create_namespaced_pod("default", pod_manifest("stuck", nodeName="shut-down"))
    core.create_namespaced_pod("default", held("waiting", **UNSCHEDULABLE))
    core.delete_namespaced_pod("stuck", "default")
    wait_for(lambda: terminating(core, "default", "stuck"))
    core.delete_namespaced_pod("waiting", "default")
    try:
        wait_for(lambda: core.read_namespaced_pod("waiting", "default").status.phase
                 == "Failed")  # a pass has looked at the stuck pod since it was terminating
        assert terminating(core, "default", "stuck")
        core.patch_node("shut-down", {"spec": {"taints": [
            {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown",
             "effect": "NoSchedule"}]}})
        wait_for(lambda: gone(core, "default", "stuck"))
    finally:
        release(core, "default", "waiting")


@pytest.mark.kubesim_only(reason="a simulated cluster of its own whose pod garbage collector "
                                 "passes every 0.1 s")
def test_terminated_pods_beyond_the_threshold_go_evicted_first_then_oldest(quick_gc) -> None:
    _, core = quick_gc
    finished = [f"done-{index}" for index in range(4)]
    for name in finished:  # one at a time, so their creation order is their names' order
        core.create_namespaced_pod("default", pod_manifest(name, **UNSCHEDULABLE))
    core.create_namespaced_pod("default", pod_manifest("evicted", **UNSCHEDULABLE))
    # a running pod is never counted: the threshold is of terminated pods
    core.create_namespaced_pod("default", pod_manifest("pending", **UNSCHEDULABLE))
    for name in finished:
        core.patch_namespaced_pod_status(name, "default", {"status": {"phase": "Succeeded"}})
    core.patch_namespaced_pod_status("evicted", "default", {"status": {
        "phase": "Failed", "reason": "Evicted", "message": "The node was low on memory."}})

    wait_for(lambda: gone(core, "default", "evicted") and gone(core, "default", "done-0"))
    remaining = {pod.metadata.name for pod in core.list_namespaced_pod("default").items}
    assert remaining == {"done-1", "done-2", "done-3", "pending"}
