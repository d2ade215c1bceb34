"""Home↔remote cut: home changes made during the cut (a new pod, a deletion) and
remote status changes are applied after reconnection, nothing is duplicated."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ClusterHandle
from tests.helpers import wait_for
from tests.home_agent.play import (
    bound_pod,
    extend,
    pod_gone,
    read_pod,
    report_shadow_status,
    shadow_pod,
    shadow_pod_exists,
)
from tests.home_agent.test_pod_offloading import running_status
from tests.home_agent.test_remote_health import kubeconfig_for_identity, ready_condition


@pytest.mark.kubesim_only(reason="the remote API server refuses the agent's identity alone "
                                 "(faults.refuse), which a real API server cannot be told to do")
def test_changes_made_during_a_cut_are_applied_after_reconnection(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_agent: Any,
        tmp_path: Path) -> None:
    identity = "annex-agent-cut-test"
    agent = start_agent(remote_kubeconfig=kubeconfig_for_identity(remote, identity, tmp_path))
    twin = extend(home, remote, agent, namespace)
    for name in ("old", "steady"):
        bound_pod(home, namespace, name, agent.node_name)
        wait_for(lambda name=name: shadow_pod(remote, twin, name), timeout=30,
                 message=f"ShadowPod {name}")

    remote.sim.faults.refuse(user=identity)
    try:
        wait_for(lambda: ready_condition(home, agent.node_name).status == "False", timeout=30,
                 message="the agent noticed the cut")
        bound_pod(home, namespace, "new", agent.node_name)
        home.core.delete_namespaced_pod("old", namespace)
        report_shadow_status(remote, twin, "steady", running_status("10.0.9.9"))
    finally:
        remote.sim.faults.restore()

    wait_for(lambda: shadow_pod(remote, twin, "new"), timeout=60,
             message="the pod created during the cut is offloaded")
    wait_for(lambda: not shadow_pod_exists(remote, twin, "old"), timeout=60,
             message="the pod deleted during the cut is deleted remotely")
    wait_for(lambda: pod_gone(home, namespace, "old"), timeout=60,
             message="and released at home")
    wait_for(lambda: ready_condition(home, agent.node_name).status == "True", timeout=30,
             message="Ready again")
    wait_for(lambda: (read_pod(home, namespace, "steady").get("status") or {}).get("podIP")
             == "10.0.9.9", timeout=60, message="remote status from the cut reaches home")
