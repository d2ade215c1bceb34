"""The pure parts of the virtual node's kubelet API: the address the node advertises, how a
request path is authorized (as kubelet's Webhook authorizer maps it), and how a home pod's
request is translated to its twin."""

from __future__ import annotations

from home_agent.node import Health, node_status


def test_the_node_advertises_only_the_agent_address_and_its_kubelet_port() -> None:
    status = node_status({}, Health(True, ""), "r", "10.1.2.3", "liqo-r", 10443)
    # No Hostname: kube-apiserver prefers it by default and nothing resolves a virtual node.
    assert status["addresses"] == [{"type": "InternalIP", "address": "10.1.2.3"}]
    assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10443}}
