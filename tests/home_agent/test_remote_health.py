"""The remote API server refusing the agent turns the virtual node Ready=False after the
failure threshold, with a reason and a message naming the remote; Ready=True after recovery."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ClusterHandle
from tests.helpers import wait_for


def kubeconfig_for_identity(remote: ClusterHandle, user: str, directory: Path) -> Path:
    """A copy of the remote kubeconfig authenticating as `user` (a static token), so that
    faults can target the agent alone."""
    from kubesim.auth import add_static_token

    token = add_static_token(remote.sim, user, ["system:masters"])
    config = yaml.safe_load(remote.kubeconfig.read_text())
    for entry in config["users"]:
        entry["user"] = {"token": token}
    path = directory / f"{user}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def ready_condition(home: ClusterHandle, node_name: str) -> Any:
    node = home.core.read_node(node_name)
    return next(c for c in node.status.conditions if c.type == "Ready")


@pytest.mark.kubesim_only(reason="the remote API server refuses the agent's identity alone "
                                 "(faults.refuse), which a real API server cannot be told to do")
def test_the_node_turns_not_ready_while_the_remote_refuses_the_agent(
        home: ClusterHandle, remote: ClusterHandle, start_agent: Any, tmp_path: Path) -> None:
    identity = "annex-agent-health-test"
    agent = start_agent(remote_kubeconfig=kubeconfig_for_identity(remote, identity, tmp_path))
    wait_for(lambda: ready_condition(home, agent.node_name).status == "True", timeout=30,
             message="Ready at first")
    remote.sim.faults.refuse(user=identity)
    try:
        condition = wait_for(
            lambda: (c := ready_condition(home, agent.node_name)).status == "False" and c,
            timeout=30, message="Ready=False after the threshold")
        assert condition.reason == "RemoteClusterUnreachable"
        assert agent.remote_id in condition.message
    finally:
        remote.sim.faults.restore()
    wait_for(lambda: ready_condition(home, agent.node_name).status == "True", timeout=30,
             message="Ready again after recovery")
