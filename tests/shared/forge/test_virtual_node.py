"""shared.forge.virtual_node: the VirtualNode's status says what its Node's Ready condition does,
and is written only when that changes. (The status itself is golden cases, virtual_node/.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.api.virtual_node import VirtualNodeStatus
from shared.forge.node import desired_node
from shared.forge.node_status import Health
from shared.forge.virtual_node import virtual_node_status

NOW = datetime(2026, 11, 21, 20, 0, tzinfo=UTC)
HEALTHS = [Health(None, ""), Health(True, ""), Health(False, "connection refused")]


@pytest.mark.parametrize("health", HEALTHS)
def test_the_virtual_node_and_its_node_say_the_same_readiness(health: Health) -> None:
    node = desired_node("liqo-remote", "remote", None, None, health, "192.168.1.10", 10250)
    [node_ready] = [c for c in node.status["conditions"] if c["type"] == "Ready"]
    status = virtual_node_status(VirtualNodeStatus(), node.name, health, NOW)
    assert status is not None
    [ready] = status["conditions"]
    assert (ready["status"], ready["reason"]) == (node_ready["status"], node_ready["reason"])


@pytest.mark.parametrize("health", HEALTHS)
def test_a_written_status_needs_no_second_write(health: Health) -> None:
    written = virtual_node_status(VirtualNodeStatus(), "liqo-remote", health, NOW)
    assert written is not None
    current = VirtualNodeStatus.model_validate(written)
    later = NOW + timedelta(minutes=5)
    assert virtual_node_status(current, "liqo-remote", health, later) is None
    assert virtual_node_status(current, "liqo-other", health, later) is not None  # renamed
    for other in HEALTHS:
        if other.ready != health.ready:
            assert virtual_node_status(current, "liqo-remote", other, later) is not None
