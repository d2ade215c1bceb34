"""annex.leader against an API server (kubesim, or a real one): one Lease, two candidates.

The tries use a clock of the test's own where a lease must expire (a candidate measures expiry
on its own clock, from when it saw the record change), and the loops run on short real timings
where leadership has to move by itself. Where a standby must learn of a change by its watch,
its retry period is far longer than the test waits: a poll could not pass it."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from annex.api_errors import ApiError, WatchExpired
from annex.api_paths import group_path
from annex.kube import load_connection
from annex.kubeapi import ClusterApi
from annex.leader import ElectionTimings, LeaderElector, candidate_identity
from remote_enforcer.rbac import leader_election_rules
from shared.api.builtin import LEASES, SERVICE_ACCOUNTS
from tests.conftest import ClusterHandle
from tests.helpers import until

LEASE = "agent-lease"
FAST = ElectionTimings(lease_duration=2.0, renew_deadline=1.0, retry_period=0.2)
SLOW = ElectionTimings(lease_duration=120.0, renew_deadline=100.0, retry_period=60.0)
"""A standby that polled would not read the Lease again within a minute."""
WATCHED = 20.0
"""Seconds a test gives a standby to act on what its watch shows (a third of SLOW's retry
period)."""


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def api(home: ClusterHandle) -> AsyncIterator[ClusterApi]:
    client = ClusterApi(load_connection(str(home.kubeconfig)))
    yield client
    await client.close()


@pytest.fixture
def candidate(api: ClusterApi, namespace: str) -> Callable[..., LeaderElector]:
    def make(name: str, timings: ElectionTimings | None = None, client: Any = None,
             clock: Callable[[], float] | None = None) -> LeaderElector:
        return LeaderElector(client or api, namespace, LEASE, candidate_identity(name),
                             timings, clock=clock or time.monotonic)
    return make


async def lease_of(api: ClusterApi, namespace: str) -> dict[str, Any]:
    lease: dict[str, Any] = await api.get(
        group_path(*LEASES.resource, namespace, LEASE))
    return lease


async def until_async(read: Callable[[], Any], wanted: Any, timeout: float,
                      message: str) -> None:
    """Until `await read()` is `wanted`."""
    async def poll() -> None:
        while await read() != wanted:
            await asyncio.sleep(0.1)
    try:
        await asyncio.wait_for(poll(), timeout)
    except TimeoutError:
        raise AssertionError(f"not within {timeout}s: {message}") from None


async def test_the_first_candidate_creates_the_lease_and_renews_it(
        api: ClusterApi, namespace: str, candidate: Callable[..., LeaderElector]) -> None:
    first = candidate("agent-a")
    assert await first.try_acquire_or_renew()
    spec = (await lease_of(api, namespace))["spec"]
    assert spec["holderIdentity"] == first.identity
    assert spec["leaseDurationSeconds"] == 15  # client-go's default
    assert spec["leaseTransitions"] == 0
    assert await first.try_acquire_or_renew()
    renewed = (await lease_of(api, namespace))["spec"]
    assert renewed["holderIdentity"] == first.identity
    assert renewed["renewTime"] > spec["renewTime"]
    assert (renewed["acquireTime"], renewed["leaseTransitions"]) == (spec["acquireTime"], 0)


async def test_a_second_candidate_waits_then_takes_over_once_the_lease_expired(
        api: ClusterApi, namespace: str, candidate: Callable[..., LeaderElector]) -> None:
    leader = candidate("agent-a")
    clock = Clock()
    standby = candidate("agent-b", clock=clock)
    assert await leader.try_acquire_or_renew()
    assert not await standby.try_acquire_or_renew()
    assert standby.holder == leader.identity
    clock.now += 14.9  # less than a lease duration since it saw the record change
    assert not await standby.try_acquire_or_renew()
    clock.now += 0.2  # the leader did not renew for a lease duration, as seen by the standby
    assert await standby.try_acquire_or_renew()
    spec = (await lease_of(api, namespace))["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == (standby.identity, 1)
    assert not await leader.try_acquire_or_renew()  # the old leader finds it taken
    assert leader.holder == standby.identity


async def test_a_renewal_keeps_the_lease_away_from_a_standby_whatever_the_clocks(
        api: ClusterApi, namespace: str, candidate: Callable[..., LeaderElector]) -> None:
    """Expiry is measured from when the standby saw the record change, not from the leader's
    renewTime: a renewal seen resets it."""
    leader = candidate("agent-a")
    clock = Clock()
    standby = candidate("agent-b", clock=clock)
    assert await leader.try_acquire_or_renew()
    assert not await standby.try_acquire_or_renew()
    clock.now += 10
    assert await leader.try_acquire_or_renew()
    assert not await standby.try_acquire_or_renew()  # changed: observed now
    clock.now += 10
    assert not await standby.try_acquire_or_renew()  # 10 s since the renewal it saw


async def test_a_released_lease_is_taken_at_once(
        api: ClusterApi, namespace: str, candidate: Callable[..., LeaderElector]) -> None:
    leader, standby = candidate("agent-a"), candidate("agent-b")
    assert await leader.try_acquire_or_renew()
    assert not await standby.try_acquire_or_renew()
    assert await leader.release()
    assert (await lease_of(api, namespace))["spec"].get("holderIdentity") in (None, "")
    assert await standby.try_acquire_or_renew()  # no lease duration to wait
    assert (await lease_of(api, namespace))["spec"]["holderIdentity"] == standby.identity
    assert await leader.release()  # not the holder any more: writes nothing
    assert (await lease_of(api, namespace))["spec"]["holderIdentity"] == standby.identity


async def test_the_holder_publishes_its_annotations_and_every_candidate_reads_the_holders(
        api: ClusterApi, namespace: str) -> None:
    """Where a replica is reached (the enforcer's webhook) travels on the Lease: written by
    whoever holds it, read by the others at their tries, and forgotten once released."""
    def elector(name: str, url: str) -> LeaderElector:
        return LeaderElector(api, namespace, LEASE, candidate_identity(name),
                             annotations={"example.test/url": url})

    leader, standby = elector("agent-a", "https://a"), elector("agent-b", "https://b")
    assert await leader.try_acquire_or_renew()
    assert not await standby.try_acquire_or_renew()
    assert standby.holder_annotations() == {"example.test/url": "https://a"}
    assert leader.holder_annotations() == {"example.test/url": "https://a"}
    assert await leader.release()
    assert leader.holder_annotations() == {}  # nobody holds it
    assert await standby.try_acquire_or_renew()
    metadata = (await lease_of(api, namespace))["metadata"]
    assert metadata["annotations"] == {"example.test/url": "https://b"}
    assert not await leader.try_acquire_or_renew()
    assert leader.holder_annotations() == {"example.test/url": "https://b"}


async def test_the_lease_goes_with_the_owner_its_candidates_name(
        api: ClusterApi, namespace: str, home: ClusterHandle) -> None:
    """The component's ServiceAccount as owner: deleted (its release uninstalled), the garbage
    collector deletes the Lease too, wherever the replicas stood."""
    account = await api.create(group_path(*SERVICE_ACCOUNTS.resource, namespace),
                               {"metadata": {"name": "component"}})
    owner = {"apiVersion": "v1", "kind": "ServiceAccount", "name": "component",
             "uid": account["metadata"]["uid"]}
    leader = LeaderElector(api, namespace, LEASE, candidate_identity("agent-a"), owner=owner)
    assert await leader.try_acquire_or_renew()
    assert (await lease_of(api, namespace))["metadata"]["ownerReferences"] == [owner]
    assert await leader.release()
    await api.delete(group_path(*SERVICE_ACCOUNTS.resource, namespace, "component"))
    path = group_path(*LEASES.resource, namespace, LEASE)
    await until_async(lambda: api.find(path), None, 30, "the Lease went with its owner")


class PausedBeforeWriting:
    """A client that holds each replace until `go` is set: the Lease read, not yet written."""

    def __init__(self, api: ClusterApi) -> None:
        self.api = api
        self.waiting = asyncio.Event()
        self.go = asyncio.Event()

    async def find(self, path: str) -> Any:
        return await self.api.find(path)

    async def create(self, path: str, body: dict[str, Any]) -> Any:
        return await self.api.create(path, body)

    async def replace(self, path: str, body: dict[str, Any]) -> Any:
        self.waiting.set()
        await self.go.wait()
        return await self.api.replace(path, body)


async def test_of_two_candidates_racing_for_a_free_lease_the_later_write_loses(
        api: ClusterApi, namespace: str, candidate: Callable[..., LeaderElector]) -> None:
    previous = candidate("agent-old")
    assert await previous.try_acquire_or_renew()
    assert await previous.release()
    paused = PausedBeforeWriting(api)
    slow, fast = candidate("agent-slow", client=paused), candidate("agent-fast")
    slow_try = asyncio.create_task(slow.try_acquire_or_renew())
    await asyncio.wait_for(paused.waiting.wait(), 10)  # it read the free Lease
    assert await fast.try_acquire_or_renew()
    paused.go.set()
    assert not await slow_try  # its update carried the resourceVersion it read: 409
    spec = (await lease_of(api, namespace))["spec"]
    assert spec["holderIdentity"] == fast.identity
    assert not await slow.try_acquire_or_renew()  # and now it sees a live holder
    assert slow.holder == fast.identity


async def test_a_conflicting_update_is_refused_by_the_api_server(
        api: ClusterApi, namespace: str, candidate: Callable[..., LeaderElector]) -> None:
    """What the elector relies on: a Lease update with an old resourceVersion is a 409."""
    assert await candidate("agent-a").try_acquire_or_renew()
    path = group_path(*LEASES.resource, namespace, LEASE)
    stale = await lease_of(api, namespace)
    await api.replace(path, {**stale, "spec": {**stale["spec"], "holderIdentity": "someone"}})
    with pytest.raises(ApiError) as refused:
        await api.replace(path, {**stale, "spec": {**stale["spec"], "holderIdentity": "other"}})
    assert refused.value.status == 409
    assert (await lease_of(api, namespace))["spec"]["holderIdentity"] == "someone"


async def test_run_leads_until_cancelled_and_a_release_hands_over_within_a_retry_period(
        api: ClusterApi, namespace: str, candidate: Callable[..., LeaderElector]) -> None:
    leader, standby = candidate("agent-a", FAST), candidate("agent-b", FAST)
    leading = asyncio.create_task(leader.run())
    await asyncio.wait_for(leader.elected.wait(), 10)
    waiting = asyncio.create_task(standby.run())
    await until(lambda: standby.holder == leader.identity, "the standby sees the leader")
    renewed = (await lease_of(api, namespace))["spec"]["renewTime"]

    async def renewed_since() -> bool:
        return str((await lease_of(api, namespace))["spec"]["renewTime"]) > str(renewed)
    for _ in range(100):  # the leader renews every retry period
        if await renewed_since():
            break
        await asyncio.sleep(FAST.retry_period / 2)
    assert await renewed_since()
    assert leader.leading and not standby.leading and not standby.elected.is_set()

    leading.cancel()
    await asyncio.gather(leading, return_exceptions=True)
    assert await leader.release()
    await asyncio.wait_for(standby.elected.wait(), FAST.retry_period * (2 + 1.2) + 5)
    assert standby.leading
    assert (await lease_of(api, namespace))["spec"]["holderIdentity"] == standby.identity
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    assert await standby.release()


async def test_a_cancel_that_comes_with_a_renewals_answer_still_stops_the_leader(
        api: ClusterApi, namespace: str, candidate: Callable[..., LeaderElector]) -> None:
    """Python 3.11's asyncio.wait_for returns the awaited result when the cancel and the
    result come in the same loop pass, and the cancel is lost: a leader renewing through it
    would then renew on for ever after it was told to stop (a SIGTERM that never ends it)."""
    leader = candidate("agent-a", FAST)
    leading = asyncio.create_task(leader.run())
    await asyncio.wait_for(leader.elected.wait(), 10)
    renew = leader.try_acquire_or_renew

    async def answered_as_cancelled() -> bool:
        renewed = await renew()
        leading.cancel()  # the stop comes with the renewal's answer
        return renewed

    leader.try_acquire_or_renew = answered_as_cancelled  # type: ignore[method-assign]
    await asyncio.wait_for(asyncio.gather(leading, return_exceptions=True), 10)
    assert leading.cancelled() and not leader.leading
    assert await leader.release()


async def test_a_dead_leader_is_replaced_after_the_lease_duration(
        api: ClusterApi, namespace: str, candidate: Callable[..., LeaderElector]) -> None:
    """A leader that stops renewing without releasing (killed): the standby waits the lease
    duration from the last renewal it saw, then takes over."""
    leader, standby = candidate("agent-a", FAST), candidate("agent-b", FAST)
    leading = asyncio.create_task(leader.run())
    await asyncio.wait_for(leader.elected.wait(), 10)
    waiting = asyncio.create_task(standby.run())
    await until(lambda: standby.holder == leader.identity, "the standby sees the leader")
    leading.cancel()  # no release: as a SIGKILL leaves it
    await asyncio.gather(leading, return_exceptions=True)
    killed = asyncio.get_running_loop().time()
    await asyncio.wait_for(standby.elected.wait(),
                           FAST.lease_duration + FAST.retry_period * (2 + 1.2) + 5)
    assert asyncio.get_running_loop().time() - killed >= FAST.lease_duration - 2 * FAST.retry_period
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    await standby.release()


async def test_a_standby_tries_again_when_the_holder_s_record_expires_not_a_period_later(
        candidate: Callable[..., LeaderElector]) -> None:
    """Between tries a standby waits a jittered retry period, as client-go does, but never past
    the moment the record it observed expires: a killed leader is replaced a lease duration
    after its last renewal was seen, not up to a retry period more."""
    timings = ElectionTimings(lease_duration=2.0, renew_deadline=1.0, retry_period=0.8)
    clock = Clock()
    leader, standby = candidate("agent-a", timings), candidate("agent-b", timings, clock=clock)
    assert await leader.try_acquire_or_renew()
    assert not await standby.try_acquire_or_renew()  # observed at 1000.0
    clock.now += 1.7
    assert standby.next_try_in(clock.now) == pytest.approx(0.3)
    clock.now += 1.0
    assert standby.next_try_in(clock.now) == 0.0
    assert await standby.try_acquire_or_renew()  # expired as seen from here: taken
    assert 0.8 <= standby.next_try_in(clock.now) <= 0.8 * 2.2  # its own: a retry period


async def test_a_leader_that_sees_another_holder_stops_at_once(
        api: ClusterApi, namespace: str, candidate: Callable[..., LeaderElector]) -> None:
    leader = candidate("agent-a", FAST)
    leading = asyncio.create_task(leader.run())
    await asyncio.wait_for(leader.elected.wait(), 10)
    while True:  # until the usurper's write lands between two renewals
        lease = await lease_of(api, namespace)
        try:
            await api.replace(group_path(*LEASES.resource, namespace, LEASE),
                              {**lease, "spec": {**lease["spec"], "holderIdentity": "usurper"}})
            break
        except ApiError as error:
            assert error.status == 409
    await asyncio.wait_for(leading, FAST.retry_period * 2 + 5)  # returns: leadership lost
    assert not leader.leading
    assert await leader.release()  # not ours: left as it is
    assert (await lease_of(api, namespace))["spec"]["holderIdentity"] == "usurper"


class Unreachable:
    """The API server stops answering (every request fails) once `cut` is set."""

    def __init__(self, api: ClusterApi) -> None:
        self.api = api
        self.cut = False

    async def _check(self) -> None:
        if self.cut:
            raise TimeoutError("cut")

    async def find(self, path: str) -> Any:
        await self._check()
        return await self.api.find(path)

    async def create(self, path: str, body: dict[str, Any]) -> Any:
        await self._check()
        return await self.api.create(path, body)

    async def replace(self, path: str, body: dict[str, Any]) -> Any:
        await self._check()
        return await self.api.replace(path, body)


async def test_a_leader_that_cannot_renew_stops_within_its_renew_deadline(
        api: ClusterApi, candidate: Callable[..., LeaderElector]) -> None:
    unreachable = Unreachable(api)
    leader = candidate("agent-a", FAST, client=unreachable)
    leading = asyncio.create_task(leader.run())
    await asyncio.wait_for(leader.elected.wait(), 10)
    unreachable.cut = True
    loop = asyncio.get_running_loop()
    cut_at = loop.time()
    await asyncio.wait_for(leading, FAST.renew_deadline + FAST.retry_period + 5)
    assert not leader.leading
    print(f"stopped leading {loop.time() - cut_at:.2f}s after the cut (a standby may take "
          f"over {FAST.lease_duration}s after the last renewal it saw)")


def test_timings_are_checked_as_client_go_checks_them() -> None:
    ElectionTimings()  # 15 s, 10 s, 2 s
    for lease, renew, retry in ((10, 10, 2), (15, 2, 2), (15, 10, 0)):
        with pytest.raises(ValueError):
            ElectionTimings(lease, renew, retry)


async def standing_by(standby: LeaderElector, leader: LeaderElector) -> asyncio.Task[None]:
    """`standby.run()` as a task, once it has read `leader`'s record."""
    waiting = asyncio.create_task(standby.run())
    await until(lambda: standby.holder == leader.identity, "the standby sees the leader")
    return waiting


async def stopped(waiting: asyncio.Task[None], elector: LeaderElector) -> None:
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    await elector.release()


async def test_a_standby_takes_a_released_lease_at_once_not_at_its_next_try(
        api: ClusterApi, namespace: str, candidate: Callable[..., LeaderElector]) -> None:
    """A leader stopped gracefully releases the Lease: its standby's watch shows it, and the
    standby takes it then, not a retry period (here a minute) later."""
    leader, standby = candidate("agent-a", SLOW), candidate("agent-b", SLOW)
    assert await leader.try_acquire_or_renew()
    waiting = await standing_by(standby, leader)
    assert await leader.release()
    await asyncio.wait_for(standby.elected.wait(), WATCHED)
    spec = (await lease_of(api, namespace))["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == (standby.identity, 1)
    await stopped(waiting, standby)


async def test_a_standby_sees_each_renewal_and_takes_a_dead_leader_s_lease_once_it_expired(
        api: ClusterApi, namespace: str, candidate: Callable[..., LeaderElector]) -> None:
    """A renewal is seen when it is made (not at the next poll, which would push the expiry up
    to a retry period further), and the record is taken as soon as it expired, measured on the
    standby's clock from then, never before."""
    timings = ElectionTimings(lease_duration=8.0, renew_deadline=7.0, retry_period=5.5)
    leader, standby = candidate("agent-a", timings), candidate("agent-b", timings)
    assert await leader.try_acquire_or_renew()
    elected_at: list[float] = []
    waiting = asyncio.create_task(standby.run(lambda: elected_at.append(time.monotonic())))
    await until(lambda: standby.holder == leader.identity, "the standby sees the leader")
    renewed_at = time.monotonic()
    assert await leader.try_acquire_or_renew()  # its last renewal: then it dies
    await until(lambda: standby.expires_at() >= renewed_at + timings.lease_duration,
                "the standby saw the renewal (sooner than its retry period)",
                timeout=timings.retry_period - 1.5)
    assert not standby.elected.is_set()
    await asyncio.wait_for(standby.elected.wait(), timings.lease_duration + 4)
    assert elected_at[0] >= renewed_at + timings.lease_duration  # never before it expired
    assert (await lease_of(api, namespace))["spec"]["holderIdentity"] == standby.identity
    await stopped(waiting, standby)


class BrokenWatches:
    """A client whose first watches fail, each as `failures` says (then they work), and which
    counts its reads and watches."""

    def __init__(self, api: ClusterApi, failures: list[Exception]) -> None:
        self.api = api
        self.failures = failures
        self.reads = 0
        self.watches = 0

    async def find(self, path: str) -> Any:
        self.reads += 1
        return await self.api.find(path)

    async def create(self, path: str, body: dict[str, Any]) -> Any:
        return await self.api.create(path, body)

    async def replace(self, path: str, body: dict[str, Any]) -> Any:
        return await self.api.replace(path, body)

    async def watch(self, path: str, resource_version: str, timeout_seconds: int = 300,
                    query: dict[str, str] | None = None) -> AsyncIterator[dict[str, Any]]:
        self.watches += 1
        if self.failures:
            raise self.failures.pop(0)
        async for event in self.api.watch(path, resource_version, timeout_seconds, query):
            yield event


async def test_an_expired_or_broken_watch_is_opened_again(
        api: ClusterApi, namespace: str, candidate: Callable[..., LeaderElector]) -> None:
    """A 410 (the version read was compacted away), then a dropped connection: the standby
    reads the Lease again after the first, watches again from the version it has after the
    second, and a release is still seen."""
    broken = BrokenWatches(api, [WatchExpired(), ConnectionResetError("dropped")])
    leader, standby = candidate("agent-a", SLOW), candidate("agent-b", SLOW, client=broken)
    assert await leader.try_acquire_or_renew()
    waiting = await standing_by(standby, leader)
    await until(lambda: broken.watches == 3, "a third watch, after the two failed",
                timeout=WATCHED)
    assert broken.reads == 2  # the try's, then one after the 410
    assert standby.watching
    assert await leader.release()
    await asyncio.wait_for(standby.elected.wait(), WATCHED)
    await stopped(waiting, standby)


async def test_a_standby_that_may_not_watch_reads_the_lease_every_retry_period(
        api: ClusterApi, namespace: str, candidate: Callable[..., LeaderElector]) -> None:
    """RBAC without `watch` on the Lease: the standby says so and polls, as client-go does."""
    refused = BrokenWatches(api, [ApiError(403, {"message": "forbidden"}) for _ in range(50)])
    leader, standby = candidate("agent-a", FAST), candidate("agent-b", FAST, client=refused)
    assert await leader.try_acquire_or_renew()
    waiting = await standing_by(standby, leader)
    await until(lambda: refused.watches >= 1 and not standby.watching, "the watch refused")
    reads = refused.reads
    await until(lambda: refused.reads >= reads + 2, "the standby polls")
    assert await leader.release()
    await asyncio.wait_for(standby.elected.wait(), FAST.retry_period * (1 + 1.2) + 5)
    await stopped(waiting, standby)


async def test_the_enforcer_s_role_lets_a_standby_watch_its_lease_by_name(
        api: ClusterApi, namespace: str, candidate: Callable[..., LeaderElector],
        home: ClusterHandle) -> None:
    """The enforcer chart's Role names the Lease (resourceNames): a watch pinned to it by
    `metadata.name` is authorized as a request for that name, as kube-apiserver's request info
    reads it, so the standby sees a release at once with no more rights than that."""
    account = "elector"
    rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/" + namespace
    await api.create(group_path(*SERVICE_ACCOUNTS.resource, namespace),
                     {"metadata": {"name": account}})
    await api.create(f"{rbac}/roles", {"metadata": {"name": account},
                                       "rules": leader_election_rules(LEASE)})
    await api.create(f"{rbac}/rolebindings", {
        "metadata": {"name": account},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]})
    token = (await api.create(
        group_path(*SERVICE_ACCOUNTS.resource, namespace, account) + "/token",
        {"spec": {"expirationSeconds": 3600}}))["status"]["token"]
    connection = dataclasses.replace(
        load_connection(str(home.kubeconfig)), token=token, token_source=None,
        certificate_path=None, private_key_path=None)
    confined = ClusterApi(connection)
    try:
        leader, standby = candidate("agent-a", SLOW), candidate("agent-b", SLOW, client=confined)
        assert await leader.try_acquire_or_renew()
        waiting = await standing_by(standby, leader)
        assert await leader.release()
        await asyncio.wait_for(standby.elected.wait(), WATCHED)
        await stopped(waiting, standby)
    finally:
        await confined.close()
