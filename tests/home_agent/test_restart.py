"""An agent restart (kill -9) relists both sides and converges: running remote pods are never
deleted, and nothing is written for objects that did not change."""

from __future__ import annotations

from typing import Any

import jsonpatch

from tests.conftest import ClusterHandle
from tests.helpers import wait_for
from tests.home_agent.play import (
    bound_pod,
    extend,
    read_pod,
    report_shadow_status,
    shadow_pod,
)
from tests.home_agent.test_pod_offloading import running_status


def test_a_restarted_agent_converges_without_writes(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_agent: Any) -> None:
    agent = start_agent()
    twin = extend(home, remote, agent, namespace)
    bound_pod(home, namespace, "web", agent.node_name)
    wait_for(lambda: shadow_pod(remote, twin, "web"), timeout=30, message="ShadowPod")
    report_shadow_status(remote, twin, "web", running_status("10.0.3.4"))
    wait_for(lambda: (read_pod(home, namespace, "web").get("status") or {}).get("phase")
             == "Running", timeout=30, message="home pod Running")
    wait_for(lambda: any(c.type == "Ready" and c.status == "True" for c in
                         home.core.read_node(agent.node_name).status.conditions or []),
             timeout=30, message="node Ready")
    node_before = home.api_client.sanitize_for_serialization(home.core.read_node(agent.node_name))
    pod_before = read_pod(home, namespace, "web")
    before = {
        "shadow": shadow_pod(remote, twin, "web")["metadata"]["resourceVersion"],
        "pod": read_pod(home, namespace, "web")["metadata"]["resourceVersion"],
        "node": home.core.read_node(agent.node_name).metadata.resource_version,
    }

    agent.process.kill()
    again = start_agent(home_id=agent.home_id, remote_id=agent.remote_id)
    # A new pod is offloaded by the new process: it has listed both sides and worked its queue.
    bound_pod(home, namespace, "probe", again.node_name)
    wait_for(lambda: shadow_pod(remote, twin, "probe"), timeout=30,
             message="the restarted agent works")

    after = {
        "shadow": shadow_pod(remote, twin, "web")["metadata"]["resourceVersion"],
        "pod": read_pod(home, namespace, "web")["metadata"]["resourceVersion"],
        "node": home.core.read_node(agent.node_name).metadata.resource_version,
    }
    node_after = home.api_client.sanitize_for_serialization(home.core.read_node(agent.node_name))
    assert after == before, (  # what changed, when something did
        jsonpatch.make_patch(node_before, node_after).patch,
        jsonpatch.make_patch(pod_before, read_pod(home, namespace, "web")).patch)
