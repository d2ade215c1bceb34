"""Agent crashes (DESIGN.md 8, issue 8): the agent is SIGKILLed at seeded random moments of a
burst of pod creations and deletions and started again each time. Afterwards there is exactly
one remote pod per live home pod and no orphan ShadowPod; the watch history, recorded from
before the burst, shows that no remote pod (nor ShadowPod) ever began going away before its
home pod was deleted, and that none was created twice; restart counts at home are the remote
ones plus what the enforcer carried over from the pods it recreated, not more, however often
the agent restarted.

Each seed is one run; FAULT_RUNS raises the number of runs (default 10), FAULT_BURST the size
of the burst (default 100 creations, 2 in 5 of them deleted; the issue asks for 500)."""

from __future__ import annotations

import os
import random
from typing import Any

import pytest

from tests.conftest import ClusterHandle
from tests.faults import fleet
from tests.faults.conftest import System
from tests.faults.history import DELETE_REMOTELY
from tests.helpers import wait_for

RUNS = int(os.environ.get("FAULT_RUNS", "10"))
BURST = int(os.environ.get("FAULT_BURST", "100"))
DELETIONS = BURST * 2 // 5
CRASHES = 2  # per run
RESTARTED_CONTAINERS = 3  # remote containers restarted by the kubelet during the burst
RECREATED = 2  # remote pods deleted during the burst (the enforcer recreates them)


def container_restarts(pod: dict[str, Any]) -> dict[str, int]:
    return {str(c.get("name")): int(c.get("restartCount") or 0)
            for c in (pod.get("status") or {}).get("containerStatuses") or []}


def restart_counts_agree(home: ClusterHandle, remote: ClusterHandle, running: System) -> bool:
    """Each home container's restarts are its remote container's plus what the enforcer carried
    over from the remote pods it replaced (ShadowPod status carriedRestarts)."""
    at_home = fleet.home_pods(home, running.namespace)
    pods = fleet.remote_pods(remote, running.twin)
    shadows = fleet.shadow_pods(remote, running.twin)

    def expected(name: str) -> dict[str, int]:
        carried = (shadows[name].get("status") or {}).get("carriedRestarts") or {}
        return {container: count + int(carried.get(container) or 0)
                for container, count in container_restarts(pods[name]).items()}

    return all(container_restarts(at_home[name]) == expected(name) for name in at_home)


def disturb_remote_side(remote: ClusterHandle, running: System, rng: random.Random,
                        spared: set[str]) -> tuple[list[str], list[str]]:
    """Restart a few running remote containers and delete a few remote pods (not of `spared`
    pods): the restart counts then have something to count. Returns (restarted, deleted)."""
    wanted = RESTARTED_CONTAINERS + RECREATED

    def running_candidates() -> list[str]:
        pods = fleet.remote_pods(remote, running.twin)
        names = sorted(name for name, pod in pods.items()
                       if fleet.phase(pod) == "Running" and name not in spared)
        return names if len(names) >= wanted else []

    candidates = wait_for(running_candidates, timeout=60, message="remote pods running")
    chosen = rng.sample(candidates, wanted)
    restarted, deleted = chosen[:RESTARTED_CONTAINERS], chosen[RESTARTED_CONTAINERS:]
    for name in restarted:
        remote.sim.controllers.kubelet.restart(running.twin, name)
    running.history.action(DELETE_REMOTELY, deleted)
    fleet.delete_pods(remote, running.twin, deleted)
    return restarted, deleted


@pytest.mark.kubesim_only  # the remote kubelet's restart hook
@pytest.mark.parametrize("seed", range(RUNS))
def test_a_crashing_agent_converges_without_losing_or_duplicating_pods(
        home: ClusterHandle, remote: ClusterHandle, system: Any, seed: int) -> None:
    rng = random.Random(seed)
    running = system()
    assert isinstance(running, System)
    names = fleet.pod_names("pod", BURST)
    plan = fleet.burst_plan(rng, names, DELETIONS)
    crash_after = set(rng.sample(range(len(plan) - 1), CRASHES))
    deleted_remotely: list[str] = []

    def meanwhile(index: int) -> None:
        nonlocal deleted_remotely
        if index in crash_after:
            running.crash_agent()
        if index == len(plan) // 2:
            _, deleted_remotely = disturb_remote_side(remote, running, rng,
                                                      spared=fleet.still_planned(plan, index))

    alive = set(names) - fleet.run_burst(home, running, plan, meanwhile)
    assert running.restarts == CRASHES

    fleet.wait_converged(home, remote, running.namespace, running.twin, alive,
                         f"seed {seed}: one Running remote pod per live home pod, no orphans")
    wait_for(lambda: restart_counts_agree(home, remote, running), timeout=60,
             message="home restart counts are remote restarts plus carried ones")

    history = running.history
    assert history.deleted_while_alive("remote/pods") == []
    assert history.deleted_while_alive("remote/shadowpods") == []
    twice = [name for name, seen in history.uids("remote/shadowpods").items() if len(seen) > 1]
    assert twice == [], history.story(twice)  # no ShadowPod created twice
    twice = [name for name, seen in history.uids("remote/pods").items()
             if len(seen) > 1 and name not in deleted_remotely]
    assert twice == [], history.story(twice)  # no pod created twice but the recreated ones
