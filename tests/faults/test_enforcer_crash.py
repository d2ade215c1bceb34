"""Enforcer crash: the enforcer is SIGKILLed in the middle of a burst of
pod creations and deletions and started again a few batches later. ShadowPods keep their pods,
no pod is created twice and none is lost; pods that had finished (Succeeded or Failed) are
never started again, even once the pod garbage collector has removed them (Liqo #1804, #3096).
"""

from __future__ import annotations

import random
from typing import Any

from tests.conftest import ClusterHandle
from tests.faults import fleet
from tests.faults.conftest import System
from tests.faults.history import DELETE_REMOTELY
from tests.finish import finish
from tests.helpers import wait_for
from tests.remote_enforcer.conftest import Enforcer

SEED = 7
BURST = 150
DELETIONS = 40
FINISHED = {"pod-0000": "Succeeded", "pod-0001": "Succeeded", "pod-0002": "Failed"}
EXIT_CODES = {name: 0 if phase == "Succeeded" else 1 for name, phase in FINISHED.items()}


def finish_remotely(remote: ClusterHandle, running: System) -> None:
    """The finished pods end remotely and the enforcer records it in their ShadowPods."""
    for name in FINISHED:
        wait_for(lambda name=name: fleet.phase(fleet.remote_pods(remote, running.twin)[name])
                 == "Running", timeout=60, message=f"{name} running")
        finish(remote.core, running.twin, name)
    wait_for(lambda: all(
        fleet.phase(fleet.shadow_pods(remote, running.twin)[name]) == phase
        for name, phase in FINISHED.items()),
        timeout=60, message="the ShadowPods report the finished phases")


def test_a_crashing_enforcer_loses_nothing_duplicates_nothing_resurrects_nothing(
        home: ClusterHandle, remote: ClusterHandle, enforcer: Enforcer, system: Any) -> None:
    rng = random.Random(SEED)
    running = system()
    assert isinstance(running, System)
    names = fleet.pod_names("pod", BURST)
    plan = fleet.burst_plan(rng, [n for n in names if n not in FINISHED], DELETIONS)
    fleet.create_pods(home, running.namespace, list(FINISHED), running.agent.node_name,
                      jobs=EXIT_CODES)
    finish_remotely(remote, running)
    crash_after, restart_after = len(plan) // 3, 2 * len(plan) // 3

    def meanwhile(index: int) -> None:
        if index == crash_after:
            enforcer.kill()
            # What the pod garbage collector does to terminated pods, while no enforcer runs.
            running.history.action(DELETE_REMOTELY, list(FINISHED))
            fleet.delete_pods(remote, running.twin, FINISHED)
        if index == restart_after:
            enforcer.start()

    try:
        alive = set(names) - fleet.run_burst(home, running, plan, meanwhile)
    finally:
        if enforcer.process is not None and enforcer.process.poll() is not None:
            enforcer.start()  # the suite's other tests need it
    fleet.wait_converged(home, remote, running.namespace, running.twin,
                         fleet.Expected(alive, FINISHED, collected=set(FINISHED)),
                         "every pod has its ShadowPod and one remote pod; finished ones stay so")

    history = running.history
    twice = [name for name, seen in history.uids("remote/shadowpods").items() if len(seen) > 1]
    assert twice == [], history.story(twice)  # no ShadowPod created twice
    twice = [name for name, seen in history.uids("remote/pods").items() if len(seen) > 1]
    assert twice == [], history.story(twice)  # no pod created twice
    assert history.deleted_while_alive("remote/pods") == []
