"""Agent crashes: the agent is SIGKILLed at seeded random moments of a
burst of pod creations and deletions and started again each time. Afterwards there is exactly
one Running remote pod per live home pod and no orphan ShadowPod; the watch history, recorded
from before the burst, shows that no remote pod (nor ShadowPod) ever began going away before
its home pod was deleted, that none was created twice and that the two the test deleted
remotely were recreated exactly once; and the home restart counts are exactly the restarts the
test caused (a container restart, a recreation, or both), and were never more at any
moment, although the agent restarted after them.

Each seed is one run; FAULT_RUNS sets the number of runs (default 10), FAULT_BURST the pods
each run creates (default 100, 2 in 5 of them deleted again; about 90 s for the 10 runs).
The issue's scale, 500 creations and 200 deletions in each of 10 runs (about 4.5 minutes on
2 shared cores, docs/benchmarks.md):

    FAULT_BURST=500 FAULT_RUNS=10 python -m pytest tests/faults/test_agent_crash.py -q
"""

from __future__ import annotations

import os
import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

from tests.conftest import ClusterHandle
from tests.faults import fleet
from tests.faults.conftest import FAULT_BURST, System
from tests.faults.history import DELETE_REMOTELY
from tests.helpers import wait_for

RUNS = int(os.environ.get("FAULT_RUNS", "10"))
BURST = FAULT_BURST
DELETIONS = BURST * 2 // 5


@dataclass(frozen=True)
class Disturbance:
    """What the test does to the remote side mid-burst, so that restart counts have something
    to count: containers the kubelet restarts, then remote pods deleted (the enforcer recreates
    them; the first of them is one whose container had restarted)."""

    restarted: list[str]
    deleted: list[str]

    def restart_counts(self, pods: set[str]) -> dict[str, int]:
        """The home restart count each of `pods` must show: one per container restart, one per
        recreation (the enforcer carries the replaced pod's restarts over, plus one)."""
        return {name: (name in self.restarted) + (name in self.deleted) for name in pods}


def restarts(pod_status: dict[str, Any]) -> int:
    """The restarts of the pod's (single) container."""
    return sum(int(container.get("restartCount") or 0)
               for container in pod_status.get("containerStatuses") or [])


def home_restart_counts(home: ClusterHandle, running: System) -> dict[str, int]:
    return {name: restarts(pod.get("status") or {})
            for name, pod in fleet.home_pods(home, running.namespace).items()}


def recorded_restarts(remote: ClusterHandle, running: System, name: str) -> int:
    """The restarts the enforcer last recorded in the pod's ShadowPod."""
    shadow_pod = fleet.shadow_pods(remote, running.twin)[name]
    return restarts((shadow_pod.get("status") or {}).get("podStatus") or {})


def disturb_remote_side(remote: ClusterHandle, running: System, rng: random.Random,
                        spared: set[str]) -> Disturbance:
    """Restart three running remote containers, and once the enforcer has recorded those
    restarts in the ShadowPods (what it carries over from a pod it replaces), delete two remote
    pods: one of the restarted ones and another. None of `spared` is touched."""
    def running_candidates() -> list[str]:
        pods = fleet.remote_pods(remote, running.twin)
        names = sorted(name for name, pod in pods.items()
                       if fleet.phase(pod) == "Running" and name not in spared)
        return names if len(names) >= 4 else []

    chosen = rng.sample(wait_for(running_candidates, timeout=60, message="remote pods running"),
                        4)
    disturbance = Disturbance(restarted=chosen[:3], deleted=chosen[2:])
    for name in disturbance.restarted:
        remote.sim.controllers.kubelet.restart(running.twin, name)
    wait_for(lambda: all(recorded_restarts(remote, running, name) == 1
                         for name in disturbance.restarted),
             timeout=60, message="the ShadowPods report the container restarts")
    pods = fleet.remote_pods(remote, running.twin)
    running.history.action(DELETE_REMOTELY, disturbance.deleted,
                           {name: pods[name]["metadata"]["uid"] for name in disturbance.deleted})
    fleet.delete_pods(remote, running.twin, disturbance.deleted)
    return disturbance


@pytest.mark.kubesim_only(reason="restarts remote containers at chosen moments (the remote "
                                 "kubelet's restart hook)")
@pytest.mark.parametrize("seed", range(RUNS))
def test_a_crashing_agent_converges_without_losing_or_duplicating_pods(
        home: ClusterHandle, remote: ClusterHandle, system: Any, seed: int) -> None:
    rng = random.Random(seed)
    running = system()
    assert isinstance(running, System)
    names = fleet.pod_names("pod", BURST)
    plan = fleet.burst_plan(rng, names, DELETIONS)
    assert Counter(action for batch in plan for action, _ in batch) == {
        "create": BURST, "delete": DELETIONS}
    middle = len(plan) // 2  # where the remote side is disturbed
    # A crash at a random moment of each half: one of them after the restarts to count.
    crash_after = {rng.randrange(middle), rng.randrange(middle, len(plan) - 1)}
    disturbed: list[Disturbance] = []

    def meanwhile(index: int) -> None:
        if index in crash_after:
            running.crash_agent()
        if index == middle:
            # Never a pod deleted at home: its remote pod may still run while its ShadowPod
            # goes, and a ShadowPod being deleted records nothing more.
            disturbed.append(disturb_remote_side(
                remote, running, rng,
                spared=fleet.still_planned(plan, index) | fleet.deleted_by(plan, index)))

    alive = set(names) - fleet.run_burst(home, running, plan, meanwhile)
    assert len(alive) == BURST - DELETIONS
    assert running.restarts == len(crash_after) == 2
    disturbance = disturbed[0]

    fleet.wait_converged(home, remote, running.namespace, running.twin, alive,
                         f"seed {seed}: one Running remote pod per live home pod, no orphans")
    expected_restarts = disturbance.restart_counts(alive)
    wait_for(lambda: home_restart_counts(home, running) == expected_restarts, timeout=60,
             message=f"seed {seed}: home restart counts are the restarts the test caused, "
                     f"once each: {disturbance}")

    history = running.history
    most = history.most_restarts("home/pods")
    overcounted = sorted(name for name in alive if most.get(name, 0) > expected_restarts[name])
    assert overcounted == [], history.story(overcounted)  # not even for a moment
    assert history.deleted_while_alive("remote/pods") == []
    assert history.deleted_while_alive("remote/shadowpods") == []
    twice = [name for name, seen in history.uids("remote/shadowpods").items() if len(seen) > 1]
    assert twice == [], history.story(twice)  # no ShadowPod created twice
    pods_ever = history.uids("remote/pods")
    twice = [name for name, seen in pods_ever.items()
             if len(seen) > 1 and name not in disturbance.deleted]
    assert twice == [], history.story(twice)  # no pod created twice...
    recreated = {name: len(pods_ever[name]) for name in disturbance.deleted}
    assert recreated == dict.fromkeys(disturbance.deleted, 2), history.story(recreated)
    # ...but the ones the test deleted remotely, recreated exactly once
