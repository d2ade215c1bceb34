"""Enforcer replicas: two enforcer processes elect a leader with the chart's durations
(client-go's 15/10/2 s), behind one webhook address (a balancer standing in for the chart's
Service), in place of the suite's enforcer. The leader is SIGKILLed halfway through a burst of
ShadowPod creations: creations meanwhile are refused until the standby leads (the standby
forwards quota reviews to a leader, and there is none), and retried as the consumer's agent
retries them. The standby takes the Lease once it has seen no renewal for a lease duration,
converges, and every ShadowPod has one pod: none made twice, none deleted. What was converged
before the SIGKILL is not written again: the new leader's first look at it writes nothing, and
what it does write (offers and Quotas follow the whole cluster) each changes its object, as the
watches recorded from before the SIGKILL show.

The burst is FAULT_BURST ShadowPods, at most 200:

    FAULT_BURST=200 python -m pytest tests/faults/test_enforcer_failover.py -q -s

prints the failover time (from the SIGKILL to the standby leading) and the time to converge.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from annex.leader import ElectionTimings
from shared.api.quota import QUOTA
from shared.api.resource_offer import RESOURCE_OFFER
from shared.api.shadowpod import SHADOWPOD
from tests.conftest import ClusterHandle
from tests.e2e.conftest import E2E_ENFORCER_FLAGS, E2E_WEBHOOK_DOMAIN, E2E_WEBHOOK_NAME
from tests.faults import fleet
from tests.faults.conftest import FAULT_BURST
from tests.faults.history import History, Recorder, pods_of, shadow_pods_of
from tests.helpers import metric_samples, wait_for
from tests.home_agent.agentproc import unique_id
from tests.remote_enforcer.conftest import (
    Enforcer,
    ShadowPods,
    counted_twin_namespace,
    room_for_pods,
    shadowpod,
    webhook_configuration,
)
from tests.remote_enforcer.replicas import Replicas, enforcer_writes, running_replicas

BURST = min(FAULT_BURST, 200)
CONVERGED = 20
"""ShadowPods converged before the SIGKILL."""
TIMINGS = ElectionTimings()  # the chart's defaults
DOMAIN = "failover.enforcer.annex.e2e"
REFUSED_WITHOUT_LEADER = "the quota is counted by the enforcer replica that leads"


@pytest.fixture
def replicas(remote: ClusterHandle, crds: None, enforcer: Enforcer,
             tmp_path: Path) -> Iterator[Replicas]:
    """Two replicas in place of the suite's enforcer (one enforcer's controllers at a time),
    with its flags, whose webhooks are unregistered meanwhile."""
    registrations = client.AdmissionregistrationV1Api(remote.api_client)
    enforcer.stop()
    registrations.delete_validating_webhook_configuration(E2E_WEBHOOK_NAME)
    try:
        with running_replicas(remote, tmp_path, DOMAIN, DOMAIN, E2E_ENFORCER_FLAGS) as running:
            yield running
    finally:
        registrations.create_validating_webhook_configuration(
            webhook_configuration(enforcer, E2E_WEBHOOK_NAME, E2E_WEBHOOK_DOMAIN))
        enforcer.start()


class Consumer:
    """A consumer with room for every ShadowPod of the test, its twin namespace, and the
    history of that namespace's ShadowPods and pods from before the first one."""

    def __init__(self, remote: ClusterHandle) -> None:
        self.remote = remote
        self.id = unique_id("home")
        self.tenant = room_for_pods(remote, self.id, pods=CONVERGED + BURST + 10)
        self.twin = counted_twin_namespace(remote, self.id)
        self.shadowpods = ShadowPods(remote.api_client)
        self.history = History()
        self.recorders = [Recorder(lister, source, self.history) for lister, source in (
            (pods_of(remote, self.twin), "remote/pods"),
            (shadow_pods_of(remote, self.twin), "remote/shadowpods"))]
        for recorder in self.recorders:
            recorder.start()

    def create(self, name: str) -> None:
        """Create the ShadowPod, trying again while no replica leads, as an agent does."""
        while True:
            try:
                self.shadowpods.create(self.twin, shadowpod(name, self.id))
                return
            except ApiException as error:
                if error.status == 409:
                    return  # stored by a try whose answer was lost
                if not (error.status == 403 and REFUSED_WITHOUT_LEADER in str(error.body)
                        or error.status >= 500):
                    raise
            time.sleep(0.2)  # the agent's backoff, shortened

    def create_all(self, names: list[str]) -> None:
        with ThreadPoolExecutor(max_workers=20) as pool:
            list(pool.map(self.create, names))

    def converged(self, names: set[str]) -> bool:
        """Every ShadowPod reports its one pod Running."""
        shadowpods = fleet.shadow_pods(self.remote, self.twin)
        pods = fleet.remote_pods(self.remote, self.twin)
        return (set(shadowpods) == names == fleet.live(pods)
                and all(fleet.phase(shadowpods[name]) == "Running" == fleet.phase(pods[name])
                        for name in names))

    def stop(self) -> None:
        for recorder in self.recorders:
            recorder.stop()


@pytest.fixture
def consumer(remote: ClusterHandle, replicas: Replicas) -> Iterator[Consumer]:
    """A consumer, gone with its pods once the test is over: the next test starts on a quiet
    cluster (its offers and Quotas would change as these pods went)."""
    made = Consumer(remote)
    yield made
    made.stop()
    for namespace in (made.twin, made.tenant):
        remote.core.delete_namespace(namespace)
    wait_for(lambda: not {made.twin, made.tenant} & {
        ns.metadata.name for ns in remote.core.list_namespace().items}, timeout=180,
        message="the consumer's namespaces are gone")


def settled(enforcer: Enforcer) -> bool:
    """Every controller of the replica has reconciled every key it holds."""
    samples = metric_samples(enforcer.get("/metrics").data.decode())
    queued = [value for (name, _), value in samples.items()
              if name == "annex_remote_enforcer_controller_queued_keys"]
    return bool(queued) and not any(queued)


def killed_leader(replicas: Replicas) -> tuple[Enforcer, float]:
    """SIGKILL the leader: (the standby, when)."""
    leader, standby = replicas.leader(), replicas.standby()
    assert enforcer_writes(standby) == {}, "a standby writes nothing"
    leader.kill()
    return standby, time.monotonic()


def leads(replicas: Replicas, standby: Enforcer) -> None:
    wait_for(lambda: replicas.role(standby) == "ok: leader",
             timeout=TIMINGS.lease_duration + 3 * TIMINGS.retry_period + 30, interval=0.05,
             message="the standby leads")


def test_the_standby_takes_over_a_killed_leader_without_duplicating_or_deleting_anything(
        remote: ClusterHandle, replicas: Replicas, consumer: Consumer) -> None:
    converged = fleet.pod_names("converged", CONVERGED)
    consumer.create_all(converged)
    wait_for(lambda: consumer.converged(set(converged)), timeout=120,
             message="the first leader converges")
    before = fleet.shadow_pods(remote, consumer.twin)

    burst = fleet.pod_names("burst", BURST)
    consumer.create_all(burst[:BURST // 2])  # admitted: the leader makes their pods
    standby, killed_at = killed_leader(replicas)
    rest = threading.Thread(target=consumer.create_all, args=(burst[BURST // 2:],))
    rest.start()  # refused until the standby leads, and tried again
    leads(replicas, standby)
    failover = time.monotonic() - killed_at
    rest.join()
    everything = {*converged, *burst}
    wait_for(lambda: consumer.converged(everything), timeout=180,
             message="every ShadowPod runs its one pod after the failover")
    converged_after = time.monotonic() - killed_at

    history = consumer.history
    assert history.first_deletions("remote/pods") == {}, "no pod deleted"
    assert history.first_deletions("remote/shadowpods") == {}, "no ShadowPod deleted"
    for source in ("remote/shadowpods", "remote/pods"):
        twice = [name for name, seen in history.uids(source).items() if len(seen) > 1]
        assert twice == [], history.story(twice)  # nothing created twice
        assert set(history.uids(source)) == everything
    # What was converged is left as it was, and no pod the new leader saw was made again.
    after = fleet.shadow_pods(remote, consumer.twin)
    assert {name: after[name]["metadata"]["resourceVersion"] for name in converged} == {
        name: before[name]["metadata"]["resourceVersion"] for name in converged}
    writes = enforcer_writes(standby)
    assert enforcer_writes(standby, codes=("409",)).get("create pods", 0) == 0
    assert not {"patch pods", "patch namespaces", "create resourcequotas",
                "patch resourcequotas", "create rolebindings"} & set(writes), writes
    print(f"\nenforcer failover, {BURST} ShadowPods, lease {TIMINGS.lease_duration:g} s / renew "
          f"{TIMINGS.renew_deadline:g} s / retry {TIMINGS.retry_period:g} s: the standby led "
          f"{failover:.1f} s after the SIGKILL, every ShadowPod ran its pod "
          f"{converged_after:.1f} s after it; the new leader's writes: {writes}")


CLUSTER_WIDE = {"offers": RESOURCE_OFFER, "quotas": QUOTA, "shadowpods": SHADOWPOD}
"""What the enforcer writes as the cluster changes (an offer follows every pod and node, a
Quota's status its consumer's usage), recorded cluster-wide."""
WRITTEN = {"create resourceoffers": ("offers", "ADDED"),
           "patch resourceoffers": ("offers", "MODIFIED"),
           "patch quotas/status": ("quotas", "MODIFIED"),
           "patch shadowpods/status": ("shadowpods", "MODIFIED")}
"""Each write, and the change it makes when it is not for an object already as it should be."""


def test_a_leader_killed_when_everything_is_converged_leaves_its_successor_nothing_to_write(
        remote: ClusterHandle, replicas: Replicas, consumer: Consumer) -> None:
    """At takeover the new leader looks at every ShadowPod, pod, twin namespace, Quota and
    offer (its keys waited in its queues) and writes only what changed: the consumer's
    converged ShadowPods and pods get nothing, and every write it makes changes its object (a
    write that changes nothing shows in its requests and in no watch)."""
    names = fleet.pod_names("converged", CONVERGED)
    consumer.create_all(names)
    wait_for(lambda: consumer.converged(set(names)), timeout=120,
             message="the first leader converges")
    wait_for(lambda: settled(replicas.leader()), timeout=60, message="the leader is idle")
    before = fleet.shadow_pods(remote, consumer.twin)
    pods = {name: pod["metadata"]["uid"]
            for name, pod in fleet.remote_pods(remote, consumer.twin).items()}
    history = History()
    custom = client.CustomObjectsApi(remote.api_client)
    recorders = [Recorder(partial(custom.list_cluster_custom_object, kind.group, kind.version,
                                  kind.plural), source, history)
                 for source, kind in CLUSTER_WIDE.items()]
    since = len(history.entries)  # the listings'; what follows changed after the SIGKILL
    for recorder in recorders:
        recorder.start()
    try:
        standby, _ = killed_leader(replicas)
        leads(replicas, standby)
        wait_for(lambda: settled(standby), timeout=60,
                 message="the new leader has reconciled every key it held")
    finally:
        for recorder in recorders:
            recorder.stop()
        for recorder in recorders:
            recorder.join()
    reconciled = sum(value for (name, labels), value in metric_samples(
        standby.get("/metrics").data.decode()).items()
        if name == "controller_runtime_reconcile_total" and ("controller", "shadowpods") in labels)
    assert reconciled >= CONVERGED  # it looked at each

    after = fleet.shadow_pods(remote, consumer.twin)
    assert {name: item["metadata"]["resourceVersion"] for name, item in after.items()} == {
        name: item["metadata"]["resourceVersion"] for name, item in before.items()}
    assert {name: pod["metadata"]["uid"] for name, pod in fleet.remote_pods(
        remote, consumer.twin).items()} == pods
    for source in CLUSTER_WIDE:
        history.of(source)  # recorded without a gap
    changes = Counter((entry.source, entry.event) for entry in history.entries[since:]
                      if not entry.deleting)  # a deletion is the garbage collector's
    tried = enforcer_writes(standby)
    assert set(tried) <= set(WRITTEN), tried  # nothing but what follows the cluster
    writes = enforcer_writes(standby, codes=("200", "201"))
    assert writes == {write: changes[change] for write, change in WRITTEN.items()
                      if changes[change]}
    print(f"\ntakeover of a converged cluster: the new leader's writes {writes}, each a change "
          "the watches saw")
