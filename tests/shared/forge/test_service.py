"""shared.forge.service: remote Services carry none of the home cluster's allocations."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from shared.forge.metadata import reflection_config
from shared.forge.service import remote_service
from shared.wellknown import FORCE_REMOTE_NODE_PORT_ANNOTATION
from tests.shared.forge.objects import EXAMPLES, HOME, REMOTE, REMOTE_NS, services


@EXAMPLES
@given(services(), st.booleans())
def test_services_never_carry_home_allocations_unless_forced(service: Any, force: bool) -> None:
    annotations = service["metadata"].setdefault("annotations", {})
    annotations[FORCE_REMOTE_NODE_PORT_ANNOTATION] = "true" if force else "no"
    spec = remote_service(service, REMOTE_NS, reflection_config(HOME, REMOTE))["spec"]
    assert spec.get("clusterIP") in (None, "None")
    assert all(ip == "None" for ip in spec.get("clusterIPs", []))
    for field in ("loadBalancerIP", "healthCheckNodePort", "externalIPs"):
        assert field not in spec
    node_ports = [port.get("nodePort") for port in spec.get("ports", [])]
    local_node_ports = [port.get("nodePort") for port in service["spec"]["ports"]]
    assert node_ports == (local_node_ports if force else [None] * len(node_ports))
