"""Active/passive agent replicas (issue 17; DESIGN.md 8 applied to a failover): two agent
processes for one remote elect a leader on their Lease with the chart's durations (client-go's
15/10/2 s). The standby, warm, writes nothing. The leader is SIGKILLed halfway through a burst of
pod creations: the standby takes the Lease within about a lease duration, rewrites the virtual
node's address to its own (where the API server reaches the kubelet API), and converges. The
watch history, recorded from before the burst, shows every pod offloaded exactly once: no
ShadowPod nor remote pod created twice, none ever deleted.

The burst is FAULT_BURST pods, at most 200 (the issue's scale):

    FAULT_BURST=200 python -m pytest tests/faults/test_agent_failover.py -q -s

prints the failover time (from the SIGKILL to the standby holding the Lease) and the time to
converge (docs/benchmarks.md, "Agent failover").
"""

from __future__ import annotations

import json
import random
import socket
import time
import urllib.error
import urllib.request
from typing import Any

from kubernetes import client

from annex.leader import ElectionTimings
from home_agent.config import default_lease_name
from tests.conftest import ClusterHandle
from tests.faults import fleet
from tests.faults.conftest import FAULT_BURST, System
from tests.helpers import wait_for
from tests.home_agent.agentproc import Process

BURST = min(FAULT_BURST, 200)
TIMINGS = ElectionTimings()  # the chart's defaults
LEASE_NAMESPACE = "annex-e2e-agents"  # tests.e2e.conftest.agent_home_kubeconfig's
STANDBY_IP = "192.0.2.11"  # the leader's is tests.e2e.conftest.peer's, 192.0.2.10
WRITES = ("create", "update", "patch", "delete", "deletecollection")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def with_flag(arguments: list[str], flag: str, value: str) -> list[str]:
    """`arguments` with every value of `flag` replaced (or the flag added)."""
    if flag not in arguments:
        return [*arguments, flag, value]
    return [value if index and arguments[index - 1] == flag else argument
            for index, argument in enumerate(arguments)]


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def writes(metrics_port: int) -> int:
    """Create/update/patch/delete requests the process sent to either cluster so far."""
    _, text = get(f"http://127.0.0.1:{metrics_port}/metrics")
    total = 0
    for line in text.splitlines():
        if line.startswith("annex_rest_client_requests_by_resource_total{") and any(
                f'verb="{verb}"' in line for verb in WRITES):
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


def raw(response: Any) -> dict[str, Any]:
    """An object read with _preload_content=False, as the API server sent it."""
    found: dict[str, Any] = json.loads(response.data)
    return found


def lease_holder(home: ClusterHandle, name: str) -> str:
    lease = raw(client.CoordinationV1Api(home.api_client).read_namespaced_lease(
        name, LEASE_NAMESPACE, _preload_content=False))
    return str(lease["spec"].get("holderIdentity") or "")


def node_endpoint(home: ClusterHandle, node_name: str) -> tuple[list[str], int]:
    status = raw(home.core.read_node(node_name, _preload_content=False))["status"]
    return ([address["address"] for address in status.get("addresses") or []],
            int(status["daemonEndpoints"]["kubeletEndpoint"]["Port"]))


def test_the_standby_takes_over_a_killed_leader_without_duplicating_or_deleting_anything(
        home: ClusterHandle, remote: ClusterHandle, system: Any, tmp_path: Any) -> None:
    leader_metrics, standby_metrics = free_port(), free_port()
    running = system(
        "--leader-elect", "--leader-elect-resource-namespace", LEASE_NAMESPACE,
        "--metrics-address", f"127.0.0.1:{leader_metrics}")
    assert isinstance(running, System)
    lease = default_lease_name(running.agent.remote_id)
    leader = running.agent.process
    old_holder = wait_for(lambda: lease_holder(home, lease), timeout=60,
                          message="the first replica leads")
    wait_for(lambda: get(f"http://127.0.0.1:{leader_metrics}/readyz") == (200, "ok: leader"),
             timeout=60, message="the leader says it leads")

    arguments = [str(a) for a in leader.popen.args[1:]]  # type: ignore[index]
    for flag, value in (("--agent-ip", STANDBY_IP), ("--kubelet-port", str(free_port())),
                        ("--metrics-address", f"127.0.0.1:{standby_metrics}")):
        arguments = with_flag(arguments, flag, value)
    standby = Process(arguments, tmp_path / "agent-standby.log")
    try:
        wait_for(lambda: get(f"http://127.0.0.1:{standby_metrics}/readyz")[0] == 200,
                 timeout=60, message="the standby is warm (ready)")
        status = get(f"http://127.0.0.1:{standby_metrics}/readyz")
        assert status == (200, f"ok: standby (leader: {old_holder})"), status

        names = fleet.pod_names("pod", BURST)
        plan = fleet.burst_plan(random.Random(17), names, 0)
        killed_at: list[float] = []

        def meanwhile(index: int) -> None:
            if index == len(plan) // 2:
                assert writes(standby_metrics) == 0, "a standby writes nothing"
                leader.kill()
                killed_at.append(time.monotonic())

        fleet.run_burst(home, running, plan, meanwhile)
        new_holder = wait_for(
            lambda: (holder := lease_holder(home, lease)) not in ("", old_holder) and holder,
            timeout=TIMINGS.lease_duration + 3 * TIMINGS.retry_period + 30,
            interval=0.05, message="the standby takes the Lease")
        failover = time.monotonic() - killed_at[0]
    except BaseException:
        standby.stop()
        print(f"--- standby log ---\n{standby.output()[-20000:]}")
        raise
    leader.stop()  # closes its log
    running.agent.process = standby  # stopped with the system, after its withdrawal

    wait_for(lambda: get(f"http://127.0.0.1:{standby_metrics}/readyz") == (200, "ok: leader"),
             timeout=30, message="the new leader says it leads")
    fleet.wait_converged(home, remote, running.namespace, running.twin, set(names),
                         "every pod offloaded once after the failover")
    converged = time.monotonic() - killed_at[0]
    assert new_holder != old_holder
    port = int(arguments[arguments.index("--kubelet-port") + 1])
    wait_for(lambda: node_endpoint(home, running.agent.node_name) == ([STANDBY_IP], port),
             timeout=30, message=f"the node's address is the new leader's ({STANDBY_IP}:{port}), "
                                 f"not {node_endpoint(home, running.agent.node_name)}")

    history = running.history
    assert history.first_deletions("remote/pods") == {}, "no remote pod deleted"
    assert history.first_deletions("remote/shadowpods") == {}, "no ShadowPod deleted"
    for source in ("remote/shadowpods", "remote/pods"):
        twice = [name for name, seen in history.uids(source).items() if len(seen) > 1]
        assert twice == [], history.story(twice)  # nothing created twice
        assert set(history.uids(source)) == set(names)
    print(f"\nagent failover, {BURST} pods, lease {TIMINGS.lease_duration:g} s / renew "
          f"{TIMINGS.renew_deadline:g} s / retry {TIMINGS.retry_period:g} s: the standby led "
          f"{failover:.1f} s after the SIGKILL, every pod converged {converged:.1f} s after it")
