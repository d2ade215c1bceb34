"""End to end: deleting an offloaded pod. The remote pod gets its grace period; the home pod is
released only once the remote pod is gone, also when the connection to
the remote cluster is cut meanwhile; the enforcer never makes the pod again.

The remote pod runs `sleep` as PID 1, which ignores SIGTERM: on a real cluster it takes its whole
grace period to stop (kubesim's kubelet is told the same through its `ignore_sigterm` hook)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import ClusterHandle
from tests.e2e.conftest import consumer_user
from tests.e2e.test_offloading import REMOTE_STRATEGY, offloaded, remote_pods
from tests.helpers import wait_for
from tests.home_agent.conftest import RunningAgent
from tests.home_agent.play import custom

GRACE_SECONDS = 8


def stubborn_pod(home: ClusterHandle, remote: ClusterHandle, namespace: str, twin: str,
                 name: str) -> str:
    """A pod whose remote pod takes its whole grace period to stop, offloaded and Running;
    returns the remote pod's uid."""
    home.core.create_namespaced_pod(namespace, {
        "metadata": {"name": name},
        "spec": {"terminationGracePeriodSeconds": GRACE_SECONDS,
                 "containers": [{"name": "main", "image": "busybox:1.36",
                                 "command": ["sleep", "3600"]}], **REMOTE_STRATEGY}})
    pod = wait_for(lambda: (p := remote_pods(remote, twin).get(name)) is not None
                   and p.status.phase == "Running" and p, timeout=60,
                   message="remote pod Running")
    if remote.sim is not None:
        remote.sim.controllers.kubelet.ignore_sigterm(twin, name)
    return str(pod.metadata.uid)


def home_pod(home: ClusterHandle, namespace: str, name: str) -> Any:
    listed = home.core.list_namespaced_pod(namespace, field_selector=f"metadata.name={name}")
    return listed.items[0] if listed.items else None


def shadow_pod_exists(remote: ClusterHandle, twin: str, name: str) -> bool:
    listed = custom(remote).list_namespaced_custom_object(
        "offloading.liqo.io", "v1beta1", twin, "shadowpods",
        field_selector=f"metadata.name={name}")
    return bool(listed["items"])


def test_the_home_pod_is_released_only_once_its_remote_pod_is_gone(
        home: ClusterHandle, remote: ClusterHandle, namespace: str,
        peered: RunningAgent) -> None:
    twin = offloaded(home, namespace)
    uid = stubborn_pod(home, remote, namespace, twin, "slow")
    home.core.delete_namespaced_pod("slow", namespace)
    seen_terminating_remotely: list[bool] = []
    violations: list[str] = []

    def released() -> bool:
        # Home first: a remote pod still there afterwards was there when home was read.
        at_home = home_pod(home, namespace, "slow") is not None
        remotely = remote_pods(remote, twin).get("slow")
        if remotely is not None and remotely.metadata.uid != uid:
            violations.append("the enforcer made the pod of a ShadowPod being deleted again")
            return True
        if not at_home:
            if remotely is not None:
                violations.append("home pod released while its remote pod was terminating")
            return True
        if remotely is not None and remotely.metadata.deletion_timestamp:
            seen_terminating_remotely.append(True)
        return False

    wait_for(released, timeout=GRACE_SECONDS + 60, message="home pod released")
    assert not violations
    assert seen_terminating_remotely  # the remote pod had its grace period meanwhile
    assert not shadow_pod_exists(remote, twin, "slow")


@pytest.mark.kubesim_only(reason="the remote API server refuses the agent's identity alone "
                                 "(faults.refuse), which a real API server cannot be told to do")
def test_a_cut_during_the_deletion_holds_the_home_pod_until_the_remote_side_is_seen_gone(
        home: ClusterHandle, remote: ClusterHandle, namespace: str,
        peered: RunningAgent) -> None:
    twin = offloaded(home, namespace)
    stubborn_pod(home, remote, namespace, twin, "slow")
    home.core.delete_namespaced_pod("slow", namespace)
    wait_for(lambda: (p := remote_pods(remote, twin).get("slow")) is not None
             and p.metadata.deletion_timestamp, timeout=60,
             message="the ShadowPod's deletion reached the remote pod")
    remote.sim.faults.refuse(user=consumer_user(peered.home_id))  # the agent alone
    try:
        wait_for(lambda: not shadow_pod_exists(remote, twin, "slow"),
                 timeout=GRACE_SECONDS + 60,
                 message="the remote pod and then its ShadowPod gone during the cut")
        assert "slow" not in remote_pods(remote, twin)
        # the agent cannot see it: it holds the home pod
        assert home_pod(home, namespace, "slow") is not None
    finally:
        remote.sim.faults.restore()
    wait_for(lambda: home_pod(home, namespace, "slow") is None, timeout=90,
             message="home pod released after the reconnection")
