"""Home↔remote cut at scale: with 200 offloaded pods running, the agent
alone is cut off the remote API server, first refused, then black-holed, for longer than the
failure threshold. Meanwhile the remote side goes on: its pods keep running, deleted ones are
recreated by the enforcer, finished ones complete; and home goes on: pods are created and
deleted and a ConfigMap is edited. After the cut everything converges, nothing duplicated and
nothing lost."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.conftest import ClusterHandle
from tests.e2e.conftest import consumer_user
from tests.faults import fleet
from tests.faults.conftest import System
from tests.faults.history import DELETE_AT_HOME, DELETE_REMOTELY
from tests.helpers import wait_for
from tests.home_agent.test_remote_health import ready_condition

FLEET = 200
JOBS = 5  # pods that run to completion (restartPolicy Never) and complete during the cut
REMOTELY_DELETED = 20
CREATED_DURING_CUT = DELETED_DURING_CUT = 10
FAILURE_THRESHOLD = 3  # tests.home_agent.agentproc.agent_args' --failure-threshold


def refused_to_black_holed(remote: ClusterHandle, user: str) -> None:
    """Turn the user's refusal into a black hole with no moment of connectivity in between:
    both are applied in one turn of the cluster's loop (the agent's refused streams are
    reset; its new requests are then held unanswered)."""
    faults = remote.sim.faults
    remote.run(lambda: (faults.restore(), faults.blackhole(user=user)))


def unanswered_checks(running: System, since: int) -> int:
    """Health checks the agent logged as timed out (a black hole answers nothing) after the
    first `since` characters of its log."""
    return len(re.findall(r"remote health check failed .*TimeoutError",
                          running.agent.process.output()[since:]))


def remote_config_map_data(remote: ClusterHandle, twin: str) -> dict[str, str]:
    return dict(remote.core.read_namespaced_config_map("settings", twin).data or {})


@pytest.mark.kubesim_only(reason="black-holes the agent's connections to the remote API server "
                                 "(faults.blackhole) and finishes remote pods during the cut (the "
                                 "remote kubelet's complete hook)")
def test_a_long_cut_loses_nothing_and_duplicates_nothing(
        home: ClusterHandle, remote: ClusterHandle, system: Any) -> None:
    running = system()
    assert isinstance(running, System)
    namespace, twin, history = running.namespace, running.twin, running.history
    node = running.agent.node_name
    names = fleet.pod_names("pod", FLEET)
    jobs = set(names[:JOBS])
    fleet.create_pods(home, namespace, names, node, jobs=dict.fromkeys(jobs, 0))
    home.core.create_namespaced_config_map(namespace, {"metadata": {"name": "settings"},
                                                       "data": {"level": "info"}})
    fleet.wait_converged(home, remote, namespace, twin, set(names),
                         f"{FLEET} pods offloaded and Running")
    wait_for(lambda: remote_config_map_data(remote, twin) == {"level": "info"}, timeout=30,
             message="the ConfigMap reflected")
    wait_for(lambda: ready_condition(home, node).status == "True", timeout=30,
             message="the virtual node Ready")
    agent_user = consumer_user(running.agent.home_id)  # the agent alone is cut off
    faults = remote.sim.faults
    remotely_deleted = names[JOBS:JOBS + REMOTELY_DELETED]
    deleted_at_home = names[-DELETED_DURING_CUT:]
    created_during_cut = fleet.pod_names("late", CREATED_DURING_CUT)
    before_cut = fleet.remote_pods(remote, twin)
    faults.refuse(user=agent_user)
    try:
        wait_for(lambda: ready_condition(home, node).status == "False", timeout=30,
                 message="Ready=False once the agent's checks are refused past the threshold")
        history.action(DELETE_REMOTELY, remotely_deleted,
                       {name: before_cut[name]["metadata"]["uid"] for name in remotely_deleted})
        fleet.delete_pods(remote, twin, remotely_deleted)
        fleet.create_pods(home, namespace, created_during_cut, node)
        history.action(DELETE_AT_HOME, deleted_at_home)
        fleet.delete_pods(home, namespace, deleted_at_home)
        home.core.patch_namespaced_config_map("settings", namespace,
                                              {"data": {"level": "debug"}})
        for job in sorted(jobs):
            remote.sim.controllers.kubelet.complete(twin, job)
        log_before = len(running.agent.process.output())
        refused_to_black_holed(remote, agent_user)
        wait_for(lambda: unanswered_checks(running, log_before) >= FAILURE_THRESHOLD, timeout=30,
                 message="health checks time out past the threshold while black-holed")
        wait_for(lambda: ready_condition(home, node).status == "False", timeout=30,
                 message="still Ready=False while black-holed")

        def remote_side_carried_on() -> bool:
            pods = fleet.remote_pods(remote, twin)
            recreated = all(name in pods and pods[name]["metadata"]["uid"]
                            != before_cut[name]["metadata"]["uid"]
                            for name in remotely_deleted)
            completed = all(fleet.phase(pods[name]) == "Succeeded" for name in jobs)
            others_run = all(fleet.phase(pods[name]) == "Running"
                             for name in set(names) - jobs)
            return recreated and completed and others_run
        wait_for(remote_side_carried_on, timeout=120,
                 message="remote pods keep running, deleted ones recreated, jobs completed")
        # Nothing of the home changes got through the cut.
        assert not set(created_during_cut) & set(fleet.shadow_pods(remote, twin))
        assert fleet.live(fleet.shadow_pods(remote, twin)) >= set(deleted_at_home)
        assert remote_config_map_data(remote, twin) == {"level": "info"}
    finally:
        faults.restore()
    expected = (set(names) - set(deleted_at_home)) | set(created_during_cut)
    fleet.wait_converged(home, remote, namespace, twin,
                         fleet.Expected(expected, dict.fromkeys(jobs, "Succeeded")),
                         "home changes applied, completions at home, nothing else")
    wait_for(lambda: remote_config_map_data(remote, twin) == {"level": "debug"}, timeout=60,
             message="the ConfigMap edit made during the cut is reflected")
    wait_for(lambda: ready_condition(home, node).status == "True", timeout=30,
             message="Ready again")
    # Nothing duplicated: one remote pod per name ever, but for the ones deleted remotely,
    # which the enforcer recreated exactly once.
    uids = history.uids("remote/pods")
    assert {name for name, seen in uids.items() if len(seen) > 1} == set(remotely_deleted)
    assert all(len(uids[name]) == 2 for name in remotely_deleted)
    assert all(len(seen) == 1 for seen in history.uids("remote/shadowpods").values())
    # Nothing lost: no remote pod went away but the ones the test deleted, on either side,
    # and none before the test deleted its home pod.
    remote_deletions = history.first_deletion("remote/pods")
    assert set(remote_deletions) == set(remotely_deleted) | set(deleted_at_home)
    assert history.deleted_while_alive("remote/pods") == []
    assert history.deleted_while_alive("remote/shadowpods") == []
