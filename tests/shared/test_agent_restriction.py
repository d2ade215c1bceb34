"""Whose node a Node is (`shared.agent_restriction.Agent.serves`): an agent's node, its
provider's pools' nodes (`<node>-<pool>`), never another agent's, even one whose node name
extends its own; a pool's node made only for a pool its provider's offer declares."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from shared.agent_restriction import agents_by_account, refusal
from shared.forge.agent import AgentTemplate, agent_name
from shared.wellknown import VIRTUAL_NODE_TAINT_EFFECT, VIRTUAL_NODE_TAINT_KEY

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


def test_a_pools_node_is_made_only_for_a_pool_the_offer_declares_and_once_known() -> None:
    east = agents_by_account(TEMPLATE, [_virtual_node("east")])[agent_name(TEMPLATE, "east")]

    def node_write(operation: str, name: str, unschedulable: bool | None = None
                   ) -> dict[str, Any]:
        spec: dict[str, Any] = {"taints": [{"key": VIRTUAL_NODE_TAINT_KEY,
                                            "effect": VIRTUAL_NODE_TAINT_EFFECT}]}
        if unschedulable is not None:
            spec["unschedulable"] = unschedulable
        return {"operation": operation, "resource": {"group": "", "resource": "nodes"},
                "name": name, "userInfo": {"username": "agent"},
                "object": {"metadata": {"name": name}, "spec": spec}}

    unknown = replace(east, offered_pools=None)
    offered = replace(east, offered_pools=frozenset({"gpu"}))
    # Its own node whatever the offer says.
    assert refusal(node_write("CREATE", "liqo-east"), unknown, TEMPLATE) is None
    assert refusal(node_write("CREATE", "liqo-east-gpu"), offered, TEMPLATE) is None
    assert refusal(node_write("CREATE", "liqo-east-gpu"), unknown, TEMPLATE) == (
        "agent of node 'liqo-east' may not create node 'liqo-east-gpu' yet: the home "
        "controller has not read east's ResourceOffer (try again)")
    assert refusal(node_write("CREATE", "liqo-east-tpu"), offered, TEMPLATE) == (
        "agent of node 'liqo-east' may not create node 'liqo-east-tpu': east's ResourceOffer "
        "declares no pool 'tpu' (its pools: gpu)")
    # A pool withdrawn: its node is kept cordoned (and its status, its deletion), never made
    # schedulable again until the pool is offered again.
    assert refusal(node_write("UPDATE", "liqo-east-tpu", unschedulable=True), offered,
                   TEMPLATE) is None
    assert "may not make schedulable node 'liqo-east-tpu'" in str(refusal(
        node_write("UPDATE", "liqo-east-tpu"), offered, TEMPLATE))
    assert refusal({**node_write("UPDATE", "liqo-east-tpu"), "subResource": "status"}, offered,
                   TEMPLATE) is None
    assert refusal(node_write("DELETE", "liqo-east-tpu"), offered, TEMPLATE) is None
