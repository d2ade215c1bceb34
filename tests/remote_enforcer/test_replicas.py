"""Two enforcer replicas behind one webhook address (a balancer standing in for the chart's
Service, which spreads the API server's connections over the pods): both serve the webhooks,
one leads. A consumer's quota stays exact whichever replica a review reaches: the leader
decides it, the standby forwards such reviews to it. Only the leader writes; stopped, it hands
over to the standby, and the cluster's mDNS announcement is the leader's.

Run with -s, the quota test prints what a review costs on each replica (the standby's include
the hop to the leader)."""

from __future__ import annotations

import json
import statistics
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes.client.rest import ApiException
from zeroconf import IPVersion, Zeroconf

from remote_enforcer.admission import WEBHOOK_PATH
from remote_enforcer.claim_admission import WEBHOOK_PATH as CLAIMS_WEBHOOK_PATH
from shared import dnssd
from tests.helpers import metric_samples, sample, wait_for
from tests.remote_enforcer.conftest import (
    PROVIDER_ID,
    Enforcer,
    ShadowPods,
    counted_twin_namespace,
    new_name,
    room_for_pods,
    shadowpod,
)
from tests.remote_enforcer.replicas import Replicas, enforcer_writes, running_replicas
from tests.remote_enforcer.test_claim_admission import claim, set_storage_quota

DOMAIN = "replicas.enforcer.annex.test"
FAST_ELECTION = ("--leader-elect-lease-duration", "4", "--leader-elect-renew-deadline", "3",
                 "--leader-elect-retry-period", "0.5")


@pytest.fixture
def replicas(remote: Any, tmp_path: Path) -> Iterator[Replicas]:
    """Two replicas electing a leader, behind one webhook address."""
    with running_replicas(remote, tmp_path, DOMAIN, DOMAIN, [
            *FAST_ELECTION, "--offer-debounce-seconds", "0.1", "--announce-mdns",
            "--announce-api-server", "https://127.0.0.1:6443",
            "--mdns-interfaces", "127.0.0.1"]) as running:
        yield running


def announced() -> bool:
    """Whether an mDNS query on the loopback interface finds the cluster announced (asked
    afresh: no cache of an earlier answer)."""
    zeroconf = Zeroconf(interfaces=["127.0.0.1"], ip_version=IPVersion.V4Only)
    try:
        return zeroconf.get_service_info(dnssd.MDNS_SERVICE_TYPE, dnssd.instance_name(
            PROVIDER_ID, "local"), timeout=2000) is not None
    finally:
        zeroconf.close()


SHADOWPOD_KIND = {"group": "offloading.liqo.io", "version": "v1beta1", "kind": "ShadowPod"}
CLAIM_KIND = {"group": "", "version": "v1", "kind": "PersistentVolumeClaim"}


def review(namespace: str, body: dict[str, Any], kind: dict[str, str] = SHADOWPOD_KIND
           ) -> dict[str, Any]:
    """The AdmissionReview the API server sends for a dry-run create of `body`."""
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "operation": "CREATE", "namespace": namespace,
        "name": body["metadata"]["name"], "object": body, "dryRun": True, "kind": kind}}


def webhook_pool(enforcer: Enforcer) -> urllib3.HTTPSConnectionPool:
    """One keep-alive connection to the replica's webhook server, as the API server keeps."""
    return urllib3.HTTPSConnectionPool(
        "127.0.0.1", enforcer.webhook_port, ca_certs=str(enforcer.cert.with_name("ca.crt")),
        assert_hostname="localhost", maxsize=1)


def forwarded(enforcer: Enforcer) -> float:
    """The reviews the replica forwarded to a leader that answered them."""
    return sample(metric_samples(enforcer.get("/metrics").data.decode()),
                  "annex_remote_enforcer_admissions_forwarded_total", result="answered") or 0.0


def review_seconds(enforcers: dict[str, Enforcer], namespace: str, body: dict[str, Any],
                   times: int) -> dict[str, list[float]]:
    """How long each of `times` reviews posted straight to each replica took, the replicas
    taken in turn (one keep-alive connection to each, as the API server keeps them)."""
    pools = {role: webhook_pool(enforcer) for role, enforcer in enforcers.items()}
    took: dict[str, list[float]] = {role: [] for role in enforcers}
    for _ in range(times):
        for role, pool in pools.items():
            started = time.perf_counter()
            answer = pool.request("POST", WEBHOOK_PATH,
                                  body=json.dumps(review(namespace, body)),
                                  headers={"Content-Type": "application/json"})
            took[role].append(time.perf_counter() - started)
            assert answer.status == 200 and json.loads(answer.data)["response"]["allowed"]
    for pool in pools.values():
        pool.close()
    return took


def test_two_replicas_admitting_at_once_never_exceed_the_quota(
        remote: Any, replicas: Replicas) -> None:
    """Creates spread over both replicas at a quota boundary: exactly the quota admitted. With
    a ledger per replica each would admit up to the quota, together up to twice it."""
    consumer = new_name("consumer")
    room_for_pods(remote, consumer, pods=10)
    twin = counted_twin_namespace(remote, consumer)
    leader, standby = replicas.leader(), replicas.standby()
    assert replicas.role(standby) == f"ok: standby (leader: {replicas.holder(remote)})"

    # What a review costs where it is decided, and where it is forwarded from.
    costs = review_seconds({"leader": leader, "standby": standby}, twin,
                           shadowpod("probe", consumer), 300)
    for role, took in costs.items():
        took.sort()
        print(f"\n{role}: a ShadowPod review in {statistics.median(took) * 1000:.2f} ms "
              f"(median of {len(took)}), p95 {took[int(len(took) * 0.95)] * 1000:.2f} ms")

    shadowpods = ShadowPods(remote.api_client)

    def create(index: int) -> bool:
        try:
            shadowpods.create(twin, shadowpod(f"burst-{index:02}", consumer))
            return True
        except ApiException as error:
            assert error.status == 403, error.body
            assert "quota exceeded for pods" in json.loads(error.body)["message"], error.body
            return False

    with ThreadPoolExecutor(max_workers=30) as pool:
        admitted = sum(pool.map(create, range(30)))
    assert admitted == 10
    listed = shadowpods.api.list_namespaced_custom_object(
        "offloading.liqo.io", "v1beta1", twin, "shadowpods")["items"]
    assert len(listed) == 10
    # Both replicas were asked: the standby forwarded what it was asked to the leader.
    assert forwarded(standby) > 300, "the burst reached the standby too"
    wait_for(lambda: len(remote.core.list_namespaced_pod(twin).items) == 10,
             message="the leader made every admitted ShadowPod's pod")
    assert enforcer_writes(standby) == {}, "a standby writes nothing"


def test_a_standby_has_the_leader_decide_a_claims_storage_quota(
        remote: Any, replicas: Replicas) -> None:
    consumer = new_name("consumer")
    set_storage_quota(remote, consumer, "1Gi")
    twin = counted_twin_namespace(remote, consumer)
    standby = replicas.standby()
    pool = webhook_pool(standby)

    def verdict(size: str) -> tuple[bool, str]:
        answer = pool.request("POST", CLAIMS_WEBHOOK_PATH, body=json.dumps(review(
            twin, claim(new_name("data"), consumer, size), CLAIM_KIND)),
            headers={"Content-Type": "application/json"})
        response = json.loads(answer.data)["response"]
        return response["allowed"], (response.get("status") or {}).get("message", "")

    before = forwarded(standby)
    assert verdict("512Mi") == (True, "")
    allowed, message = verdict("2Gi")
    assert not allowed and message.startswith("quota exceeded for requests.storage"), message
    assert forwarded(standby) == before + 2
    pool.close()


def test_a_stopped_leader_hands_over_to_the_standby_which_then_decides_and_writes(
        remote: Any, replicas: Replicas) -> None:
    consumer = new_name("consumer")
    room_for_pods(remote, consumer, pods=10)
    twin = counted_twin_namespace(remote, consumer)
    shadowpods = ShadowPods(remote.api_client)
    leader, standby = replicas.leader(), replicas.standby()
    first = replicas.holder(remote)
    shadowpods.create(twin, shadowpod("before", consumer))
    wait_for(lambda: len(remote.core.list_namespaced_pod(twin).items) == 1)
    assert announced()

    stopped = time.monotonic()
    leader.stop()  # SIGTERM: it stops deciding and writing, then releases the Lease
    wait_for(lambda: replicas.role(standby) == "ok: leader", timeout=10,
             message="the standby leads once the Lease is released")
    print(f"\nthe standby led {time.monotonic() - stopped:.1f} s after the leader's SIGTERM")
    assert replicas.holder(remote) not in ("", first)
    for index in range(5):  # every review reaches the new leader now
        shadowpods.create(twin, shadowpod(f"after-{index}", consumer))
    wait_for(lambda: len(remote.core.list_namespaced_pod(twin).items) == 6,
             message="the new leader made the new ShadowPods' pods")
    wait_for(announced, timeout=20, message="the new leader announces the cluster")
