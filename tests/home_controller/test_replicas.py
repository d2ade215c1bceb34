"""Two home controller replicas elect a leader on a Lease (--leader-elect): only the leader
runs the controllers (a VirtualNode gets its agent from it alone), the standby keeps its
watches warm, writes nothing and says whom it follows; killed, the leader is replaced about a
lease duration later, and the new leader carries on (a new VirtualNode gets its agent)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.forge.agent import AgentTemplate
from tests.conftest import ClusterHandle
from tests.faults.test_agent_failover import get, writes
from tests.helpers import free_ports, wait_for
from tests.home_agent.agentproc import Process
from tests.home_controller.test_virtual_nodes import agent_template, apply_virtual_node, read

TIMINGS = ("--leader-elect-lease-duration", "4", "--leader-elect-renew-deadline", "3",
           "--leader-elect-retry-period", "1")


def readyz(port: int) -> tuple[int, str]:
    return get(f"http://127.0.0.1:{port}/readyz")


@dataclass
class Pair:
    """Two controller replicas: the first leads, the second is ready and stands by."""

    template: AgentTemplate
    leader: Process
    standby: Process
    standby_port: int


def elected(start_controller: Any, namespace: str, tmp_path: Path,
            timings: tuple[str, ...] = TIMINGS) -> Pair:
    path, template = agent_template(namespace, tmp_path)
    flags = ("--namespace", namespace, "--agent-template", str(path), "--leader-elect",
             "--leader-elect-resource-namespace", namespace, *timings)
    first_port, second_port = free_ports(2)
    first = start_controller(*flags, "--health-port", str(first_port))
    wait_for(lambda: readyz(first_port) == (200, "ok: leader"), timeout=60,
             message="the first replica leads")
    second = start_controller(*flags, "--health-port", str(second_port))
    wait_for(lambda: readyz(second_port)[0] == 200, timeout=60,
             message="the second replica is ready")
    return Pair(template, first, second, second_port)


def test_only_the_leader_acts_and_a_standby_takes_over_a_killed_one(
        home: ClusterHandle, namespace: str, start_controller: Any, tmp_path: Path) -> None:
    pair = elected(start_controller, namespace, tmp_path)
    template, first, second, second_port = (pair.template, pair.leader, pair.standby,
                                            pair.standby_port)
    assert readyz(second_port)[1].startswith("ok: standby (leader: ")

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


def test_a_stopped_leader_hands_over_at_once(
        home: ClusterHandle, namespace: str, start_controller: Any, tmp_path: Path) -> None:
    """SIGTERM (a rolling update, a drain): the leader stops its controllers, then releases the
    Lease; the standby, watching it, need not wait for it to expire nor for its next try."""
    pair = elected(start_controller, namespace, tmp_path, (
        "--leader-elect-lease-duration", "60", "--leader-elect-renew-deadline", "30",
        "--leader-elect-retry-period", "20"))
    second_port = pair.standby_port
    assert pair.leader.stop() == 0
    # Well within the 60 s lease and the 20 s retry period: the release was seen as it came.
    wait_for(lambda: readyz(second_port) == (200, "ok: leader"), timeout=15,
             message="the standby leads once the Lease is released")


AGENTS = 6
"""VirtualNodes whose agents the first leader is making when it is killed."""


def deployments(home: ClusterHandle, namespace: str, names: list[str]) -> dict[str, Any]:
    """name → (uid, generation, pod template) of each agent Deployment there is."""
    found = {}
    for name in names:
        deployment = read(home, "Deployment", namespace, name)
        if deployment is not None:
            found[name] = (deployment["metadata"]["uid"], deployment["metadata"]["generation"],
                           deployment["spec"]["template"])
    return found


def test_a_leader_killed_while_it_makes_agents_leaves_its_successor_the_ones_it_made(
        home: ClusterHandle, namespace: str, start_controller: Any, tmp_path: Path) -> None:
    """The new leader finds the agent Deployments the killed one made as they should be: it
    makes the missing ones and neither recreates nor rewrites (restarts) the others."""
    pair = elected(start_controller, namespace, tmp_path)
    template, first, second_port = pair.template, pair.leader, pair.standby_port
    providers = [f"provider-{index}" for index in range(AGENTS)]
    names = [f"{template.name_prefix}-{provider}" for provider in providers]
    for provider in providers:
        apply_virtual_node(home, namespace, provider)
    made = wait_for(lambda: deployments(home, namespace, names), timeout=30, interval=0.02,
                    message="the leader made a first agent")
    first.kill()
    made = deployments(home, namespace, names)  # and what it made before it died
    assert writes(second_port) == {}, "a standby writes nothing"

    wait_for(lambda: readyz(second_port) == (200, "ok: leader"), timeout=30,
             message="the standby leads once the killed leader's Lease expired")
    wait_for(lambda: len(deployments(home, namespace, names)) == AGENTS, timeout=30,
             message="the new leader made the missing agents")
    after = deployments(home, namespace, names)
    assert {name: after[name] for name in made} == made  # same object, spec never rewritten
    assert all(generation == 1 for _, generation, _ in after.values())
    tried = writes(second_port)
    assert not {write for write in tried if write.endswith(" deployments")
                and not write.startswith("create ")}, tried
    assert tried.get("create deployments", 0) == AGENTS - len(made), tried
