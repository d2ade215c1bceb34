"""Active/passive agent replicas: two agent
processes for one remote elect a leader on their Lease with the chart's durations (client-go's
15/10/2 s). The standby, warm, writes nothing. The leader is SIGKILLed halfway through a burst of
pod creations: the standby takes the Lease within about a lease duration, rewrites the virtual
node's address to its own (where the API server reaches the kubelet API), and converges. The
watch history, recorded from before the burst, shows every pod offloaded exactly once: no
ShadowPod nor remote pod created twice, none ever deleted. A leader stopped with SIGTERM (a
rolling update, a drain) releases the Lease: the standby, watching it, leads at once.

The burst is FAULT_BURST pods, at most 200 (the issue's scale):

    FAULT_BURST=200 python -m pytest tests/faults/test_agent_failover.py -q -s

prints the failover time (from the SIGKILL to the standby holding the Lease), the time to
converge and the graceful hand-over time (docs/benchmarks.md, "Failover").
"""

from __future__ import annotations

import json
import random
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from annex.leader import JITTER_FACTOR, ElectionTimings
from home_agent.config import default_lease_name
from tests.conftest import ClusterHandle
from tests.e2e.conftest import agent_kubelet_service
from tests.faults import fleet
from tests.faults.conftest import FAULT_BURST, System
from tests.helpers import free_ports, wait_for
from tests.home_agent.agentproc import Process

BURST = min(FAULT_BURST, 200)
TIMINGS = ElectionTimings()  # the chart's defaults
LEASE_NAMESPACE = "annex-e2e-agents"  # tests.e2e.conftest.agent_home_kubeconfig's
STANDBY_IP = "192.0.2.11"  # the leader's is tests.e2e.conftest.peer's, 192.0.2.10
WRITES = ("create", "update", "patch", "delete", "deletecollection")



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


TAKEOVER_WRITES = frozenset({"leases", "nodes/status"})
"""What a new leader writes however converged everything is: its election Lease and the node's
heartbeat Lease, and the node's address (now its own, where the API server reaches its kubelet
API). Never a pod: their hostIP is the kubelet Service's."""


def writes(metrics_port: int, but: frozenset[str] = frozenset()) -> dict[str, int]:
    """Create/update/patch/delete requests the process sent to either cluster so far, by
    `verb resource`, but for the resources `but` names."""
    _, text = get(f"http://127.0.0.1:{metrics_port}/metrics")
    found: dict[str, int] = {}
    for line in text.splitlines():
        if not line.startswith("annex_rest_client_requests_by_resource_total{"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}", 1)[0]))
        if labels["verb"] in WRITES and labels["resource"] not in but:
            key = f"{labels['verb']} {labels['resource']}"
            found[key] = found.get(key, 0) + int(float(line.rsplit(" ", 1)[1]))
    return found


def converged(metrics_port: int) -> bool:
    """No key of the agent's or of reflection waits (a standby's wait parked)."""
    _, text = get(f"http://127.0.0.1:{metrics_port}/metrics")
    queued = [line for line in text.splitlines()
              if line.startswith("annex_home_agent_controller_queued_keys")]
    return bool(queued) and all(line.rsplit(" ", 1)[1] in ("0", "0.0") for line in queued)


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


@dataclass
class Replicas:
    """Two agent processes for one remote: `running.agent.process` leads, `standby` waits."""

    running: System
    lease: str
    leader_identity: str
    standby: Process
    standby_metrics: int
    standby_kubelet_port: int

    def readyz(self) -> tuple[int, str]:
        return get(f"http://127.0.0.1:{self.standby_metrics}/readyz")

    def new_holder(self, home: ClusterHandle, timeout: float) -> str:
        return str(wait_for(
            lambda: (found := lease_holder(home, self.lease)) not in (
                "", self.leader_identity) and found,
            timeout=timeout, interval=0.05, message="the standby takes the Lease"))

    def hand_over(self) -> None:
        """The old leader is gone: the standby is the agent the system stops (after its
        withdrawal)."""
        self.running.agent.process.stop()  # closes its log
        self.running.agent.process = self.standby


def replicas(system: Any, home: ClusterHandle, tmp_path: Any) -> Replicas:
    """A system whose agent leads, and a second replica of it, warm and standing by."""
    leader_metrics, standby_metrics, kubelet_port = free_ports(3)
    running = system(
        "--leader-elect", "--leader-elect-resource-namespace", LEASE_NAMESPACE,
        "--metrics-address", f"127.0.0.1:{leader_metrics}",
        "--kubelet-service", agent_kubelet_service(home))
    assert isinstance(running, System)
    lease = default_lease_name(running.agent.remote_id)
    leader_identity = wait_for(lambda: lease_holder(home, lease), timeout=60,
                               message="the first replica leads")
    wait_for(lambda: get(f"http://127.0.0.1:{leader_metrics}/readyz") == (200, "ok: leader"),
             timeout=60, message="the leader says it leads")
    arguments = [str(a) for a in running.agent.process.popen.args[1:]]  # type: ignore[index]
    for flag, value in (("--agent-ip", STANDBY_IP), ("--kubelet-port", str(kubelet_port)),
                        ("--metrics-address", f"127.0.0.1:{standby_metrics}")):
        arguments = with_flag(arguments, flag, value)
    pair = Replicas(running, lease, leader_identity,
                    Process(arguments, tmp_path / "agent-standby.log"), standby_metrics,
                    kubelet_port)
    try:
        wait_for(lambda: pair.readyz()[0] == 200, timeout=60,
                 message="the standby is warm (ready)")
        assert pair.readyz() == (200, f"ok: standby (leader: {leader_identity})")
    except BaseException:
        stop_standby(pair)
        raise
    return pair


def stop_standby(pair: Replicas) -> None:
    """Before a hand-over the standby is the test's to stop (with its log shown)."""
    pair.standby.stop()
    print(f"--- standby log ---\n{pair.standby.output()[-20000:]}")


def test_the_standby_takes_over_a_killed_leader_without_duplicating_or_deleting_anything(
        home: ClusterHandle, remote: ClusterHandle, system: Any, tmp_path: Any) -> None:
    pair = replicas(system, home, tmp_path)
    running = pair.running
    try:
        names = fleet.pod_names("pod", BURST)
        plan = fleet.burst_plan(random.Random(17), names, 0)
        killed_at: list[float] = []

        def meanwhile(index: int) -> None:
            if index == len(plan) // 2:
                assert writes(pair.standby_metrics) == {}, "a standby writes nothing"
                running.agent.process.kill()
                killed_at.append(time.monotonic())

        fleet.run_burst(home, running, plan, meanwhile)
        pair.new_holder(home, TIMINGS.lease_duration + 3 * TIMINGS.retry_period + 30)
        failover = time.monotonic() - killed_at[0]
    except BaseException:
        stop_standby(pair)
        raise
    pair.hand_over()

    wait_for(lambda: pair.readyz() == (200, "ok: leader"), timeout=30,
             message="the new leader says it leads")
    fleet.wait_converged(home, remote, running.namespace, running.twin, set(names),
                         "every pod offloaded once after the failover")
    converged = time.monotonic() - killed_at[0]
    endpoint = ([STANDBY_IP], pair.standby_kubelet_port)
    wait_for(lambda: node_endpoint(home, running.agent.node_name) == endpoint,
             timeout=30, message=f"the node's address is the new leader's ({endpoint}), "
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


def test_a_stopped_leader_releases_the_lease_and_the_standby_leads_at_once(
        home: ClusterHandle, remote: ClusterHandle, system: Any, tmp_path: Any) -> None:
    """A rolling update or a drain: SIGTERM stops the leader's writes, then releases the
    Lease, so the standby need not wait for it to expire. Taking over converged pods, the new
    leader writes only what its own address changes, the node's: the pods' hostIP is the
    kubelet Service's, the same for both replicas, so no pod is written."""
    pair = replicas(system, home, tmp_path)
    running = pair.running
    try:
        before = fleet.pod_names("before", 20)
        fleet.create_pods(home, running.namespace, before, running.agent.node_name)
        fleet.wait_converged(home, remote, running.namespace, running.twin, set(before),
                             "the first leader offloads")
        stopped_at = time.monotonic()
        assert running.agent.process.stop() == 0
        released = time.monotonic() - stopped_at
        pair.new_holder(home, TIMINGS.retry_period * (1 + JITTER_FACTOR) + 10)
        handover = time.monotonic() - stopped_at
    except BaseException:
        stop_standby(pair)
        raise
    pair.hand_over()
    wait_for(lambda: converged(pair.standby_metrics), timeout=60,
             message="the new leader has reconciled every key it held")
    endpoint = ([STANDBY_IP], pair.standby_kubelet_port)
    wait_for(lambda: node_endpoint(home, running.agent.node_name) == endpoint, timeout=30,
             message="the node's address is the new leader's")
    assert writes(pair.standby_metrics, but=TAKEOVER_WRITES) == {}
    namespace, name = agent_kubelet_service(home).split("/")
    service_ip = home.core.read_namespaced_service(name, namespace).spec.cluster_ip
    assert {pod["status"]["hostIP"] for pod in fleet.home_pods(home, running.namespace)
            .values()} == {service_ip}

    after = fleet.pod_names("after", 10)
    fleet.create_pods(home, running.namespace, after, running.agent.node_name)
    fleet.wait_converged(home, remote, running.namespace, running.twin, {*before, *after},
                         "the new leader offloads")
    print(f"\ngraceful hand-over: the leader stopped in {released:.1f} s, the standby led "
          f"{handover:.1f} s after the SIGTERM")
