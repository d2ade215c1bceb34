"""Two home controller replicas elect a leader on a Lease (--leader-elect): only the leader
runs the controllers (a VirtualNode gets its agent from it alone), the standby keeps its
watches warm, writes nothing and says whom it follows; killed, the leader is replaced about a
lease duration later, and the new leader carries on (a new VirtualNode gets its agent)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import ClusterHandle
from tests.faults.test_agent_failover import get, writes
from tests.helpers import free_ports, wait_for
from tests.home_controller.test_virtual_nodes import agent_template, apply_virtual_node, read

TIMINGS = ("--leader-elect-lease-duration", "4", "--leader-elect-renew-deadline", "3",
           "--leader-elect-retry-period", "1")


def readyz(port: int) -> tuple[int, str]:
    return get(f"http://127.0.0.1:{port}/readyz")


def test_only_the_leader_acts_and_a_standby_takes_over_a_killed_one(
        home: ClusterHandle, namespace: str, start_controller: Any, tmp_path: Path) -> None:
    path, template = agent_template(namespace, tmp_path)
    flags = ("--namespace", namespace, "--agent-template", str(path), "--leader-elect",
             "--leader-elect-resource-namespace", namespace, *TIMINGS)
    first_port, second_port = free_ports(2)
    first = start_controller(*flags, "--health-port", str(first_port))
    wait_for(lambda: readyz(first_port) == (200, "ok: leader"), timeout=60,
             message="the first replica leads")
    second = start_controller(*flags, "--health-port", str(second_port))
    standby = wait_for(lambda: (answer := readyz(second_port))[0] == 200 and answer[1],
                       timeout=60, message="the second replica is ready")
    assert standby.startswith("ok: standby (leader: ")

    apply_virtual_node(home, namespace, "provider-a")
    name = f"{template.name_prefix}-provider-a"
    wait_for(lambda: read(home, "Deployment", namespace, name), timeout=30,
             message="the leader made the first VirtualNode's agent")
    assert writes(second_port) == {}, "a standby writes nothing"

    first.kill()
    wait_for(lambda: readyz(second_port) == (200, "ok: leader"), timeout=30,
             message="the standby leads once the killed leader's Lease expired")
    apply_virtual_node(home, namespace, "provider-b")
    wait_for(lambda: read(home, "Deployment", namespace, f"{template.name_prefix}-provider-b"),
             timeout=30, message="the new leader made the second VirtualNode's agent")
    assert second.popen.poll() is None


def test_a_stopped_leader_hands_over_at_the_standby_s_next_try(
        home: ClusterHandle, namespace: str, start_controller: Any, tmp_path: Path) -> None:
    """SIGTERM (a rolling update, a drain): the leader stops its controllers, then releases the
    Lease; the standby need not wait for it to expire."""
    path, _ = agent_template(namespace, tmp_path)
    flags = ("--namespace", namespace, "--agent-template", str(path), "--leader-elect",
             "--leader-elect-resource-namespace", namespace, "--leader-elect-lease-duration",
             "60", "--leader-elect-renew-deadline", "10", "--leader-elect-retry-period", "1")
    first_port, second_port = free_ports(2)
    first = start_controller(*flags, "--health-port", str(first_port))
    wait_for(lambda: readyz(first_port) == (200, "ok: leader"), timeout=60,
             message="the first replica leads")
    start_controller(*flags, "--health-port", str(second_port))
    wait_for(lambda: readyz(second_port)[0] == 200, timeout=60, message="the standby ready")
    assert first.stop() == 0
    # Well within the 60 s lease: the Lease was released, not left to expire.
    wait_for(lambda: readyz(second_port) == (200, "ok: leader"), timeout=15,
             message="the standby leads at its next try")
