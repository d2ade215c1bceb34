"""--leader-elect, one agent process: it takes its Lease and says so, and when the Lease is
taken from it, it stops at once with exit code 1 (to restart as a standby). The failover
between two replicas: tests/faults/test_agent_failover.py."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from home_agent.config import default_lease_name, parse_config
from tests.helpers import free_port, wait_for
from tests.home_agent.test_process import _get

TIMINGS = ("--leader-elect-lease-duration", "4", "--leader-elect-renew-deadline", "2",
           "--leader-elect-retry-period", "0.5")


def test_the_election_flags_default_to_client_go_and_to_the_pod_namespace() -> None:
    base = ["--remote-kubeconfig", "r", "--cluster-id", "h", "--remote-cluster-id", "p"]
    assert parse_config(base).leader_election is None  # one agent writes from the start
    election = parse_config([*base, "--leader-elect=true",
                             "--leader-elect-resource-namespace", "agents"]).leader_election
    assert election is not None
    assert (election.namespace, election.name) == ("agents", "annex-home-agent-p")
    timings = election.timings
    assert (timings.lease_duration, timings.renew_deadline, timings.retry_period) == (15, 10, 2)
    with pytest.raises(SystemExit):  # a renew deadline longer than the lease
        parse_config([*base, "--leader-elect", "--leader-elect-resource-namespace", "agents",
                      "--leader-elect-renew-deadline", "20"])


def usurp(home: Any, namespace: str, name: str) -> None:
    leases = client.CoordinationV1Api(home.api_client)
    while True:  # between two of the agent's renewals
        lease = leases.read_namespaced_lease(name, namespace)
        assert lease.spec is not None
        lease.spec.holder_identity = "usurper"
        try:
            leases.replace_namespaced_lease(name, namespace, lease)
            return
        except ApiException as error:
            if error.status != 409:
                raise


def test_an_agent_that_loses_its_lease_stops_at_once(start_agent: Any, home: Any,
                                                     namespace: str) -> None:
    port = free_port()
    agent = start_agent("--leader-elect", "--leader-elect-resource-namespace", namespace,
                        *TIMINGS, "--metrics-address", f"127.0.0.1:{port}")
    wait_for(lambda: _get(f"http://127.0.0.1:{port}/readyz") == (200, "ok: leader"),
             timeout=30, message="the only candidate leads")
    wait_for(lambda: home.core.read_node(agent.node_name), timeout=30,
             message="the leader writes: its node")
    usurp(home, namespace, default_lease_name(agent.remote_id))
    try:
        code = agent.process.popen.wait(timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail("the agent kept running without its Lease")
    assert code == 1
    assert "leadership lost: stopping every write" in agent.process.output()
