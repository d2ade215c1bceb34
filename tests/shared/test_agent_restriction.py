"""Whose node a Node is (`shared.agent_restriction.Agent.serves`): an agent's node, its
provider's pools' nodes (`<node>-<pool>`), never another agent's, even one whose node name
extends its own."""

from __future__ import annotations

from typing import Any

from shared.agent_restriction import agents_by_account
from shared.forge.agent import AgentTemplate, agent_name

TEMPLATE = AgentTemplate(name_prefix="annex-home-agent", namespace="annex", image="annex:test",
                         webhook_cert_secret="annex-home-agent-tls")


def _virtual_node(cluster_id: str) -> dict[str, Any]:
    return {"apiVersion": "offloading.liqo.io/v1beta1", "kind": "VirtualNode",
            "metadata": {"name": cluster_id, "namespace": "annex"},
            "spec": {"clusterId": cluster_id}}


def test_an_agent_serves_its_node_and_its_pools_nodes_never_a_nested_agents() -> None:
    agents = agents_by_account(TEMPLATE, [_virtual_node("east"), _virtual_node("east-2")])
    east, east_2 = agents[agent_name(TEMPLATE, "east")], agents[agent_name(TEMPLATE, "east-2")]
    assert east.serves("liqo-east") and east.serves("liqo-east-gpu")
    assert east.serves("liqo-east-zone-a")
    assert not east.serves("liqo-east-2"), "another agent's node"
    assert not east.serves("liqo-east-2-gpu"), "another agent's pool's node"
    assert east_2.serves("liqo-east-2") and east_2.serves("liqo-east-2-gpu")
    assert not east_2.serves("liqo-east") and not east_2.serves("liqo-east-gpu")
    assert not east.serves("liqo-east-"), "no pool has an empty name"
    assert not east.serves("liqo-east-GPU"), "nor one a pool could not have"
    assert not east.serves("liqo-east-" + "x" * 21)
    assert not east.serves("liqo-eastern")
