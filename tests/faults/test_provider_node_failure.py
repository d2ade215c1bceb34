"""A provider node fails: the remote pod on it, marked for deletion, stays Terminating (no
kubelet confirms it) until the enforcer force-deletes it; the ShadowPod then gets a new pod on a
node that works, and the home pod runs on, the same pod."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from remote_enforcer.node_failure import FORCE_DELETED_REASON
from tests.conftest import ClusterHandle
from tests.faults import fleet
from tests.faults.conftest import System
from tests.helpers import wait_for

UNREACHABLE = "node.kubernetes.io/unreachable"


def running_elsewhere(remote: ClusterHandle, twin: str, name: str, uid: str,
                      node: str) -> dict[str, Any] | None:
    pod = fleet.remote_pods(remote, twin).get(name)
    if (pod is None or pod["metadata"]["uid"] == uid or fleet.phase(pod) != "Running"
            or pod["spec"].get("nodeName") == node):
        return None
    return pod


@pytest.mark.kubesim_only(reason="stops one provider node's kubelet (kubelet.stop_kubelet) while "
                                 "the API server and the other nodes go on: no test can take a "
                                 "real node down")
def test_the_pods_of_a_failed_provider_node_are_made_again_on_another(
        home: ClusterHandle, remote: ClusterHandle, system: Any) -> None:
    running = system()
    assert isinstance(running, System)
    fleet.create_pods(home, running.namespace, ["stranded"], running.agent.node_name)
    pod = wait_for(lambda: (p := fleet.remote_pods(remote, running.twin).get("stranded"))
                   and fleet.phase(p) == "Running" and p, timeout=60, message="running remotely")
    node, uid = pod["spec"]["nodeName"], pod["metadata"]["uid"]
    home_uid = fleet.home_pods(home, running.namespace)["stranded"]["metadata"]["uid"]
    kubelet = remote.sim.controllers.kubelet
    kubelet.stop_kubelet(node)
    try:
        # What the node lifecycle controller writes once the node's Lease is stale for its grace
        # period (40 s), and what the taint manager does after the pod's toleration (300 s):
        # done at once here. Then the node is tainted unreachable (nothing new lands there).
        remote.core.patch_node_status(node, {"status": {"conditions": [{
            "type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
            "message": "Kubelet stopped posting node status.",
            "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}]}})
        wait_for(lambda: any(t.key == UNREACHABLE and t.effect == "NoSchedule"
                             for t in remote.core.read_node(node).spec.taints or []),
                 timeout=30, message="the failed node tainted unreachable")
        remote.core.delete_namespaced_pod("stranded", running.twin)

        replacement = wait_for(lambda: running_elsewhere(remote, running.twin, "stranded", uid,
                                                         node),
                               timeout=60, message="a new remote pod running on another node")
        assert replacement["metadata"]["ownerReferences"][0]["kind"] == "ShadowPod"
        reasons = {event.reason for event in remote.core.list_namespaced_event(
            running.twin, field_selector="involvedObject.name=stranded").items}
        assert FORCE_DELETED_REASON in reasons
        # The home pod is the same pod, Running again from its new remote pod.
        wait_for(lambda: fleet.phase(fleet.home_pods(home, running.namespace)["stranded"])
                 == "Running", timeout=60, message="the home pod Running")
        assert fleet.home_pods(home, running.namespace)["stranded"]["metadata"]["uid"] == (
            home_uid)
    finally:
        kubelet.start_kubelet(node)
