"""Leader election on a coordination.k8s.io/v1 Lease, for components run as active/passive
replicas: only the leader writes, a standby keeps its watches and mirrors warm and takes over
when the leader is gone.

It follows client-go's tools/leaderelection (the Lease lock), on this package's asyncio client
rather than with the `kubernetes` package's `kubernetes.leaderelection`, which is blocking
(threads and `time.sleep`, its own urllib3 client outside the components' rate limiter, request
metrics and live credentials), measures the lease on the wall clock, bounds no renewal by the
renew deadline and never releases the lease on stop.

client-go's rules, kept here:
- A candidate notes when the Lease's record last changed, on its own monotonic clock: no replica
  trusts another's clock (renewTime is informative only). The holder counts as alive until the
  record's leaseDurationSeconds have passed since it was seen to change.
- A Lease that is absent, free (no holder) or expired is taken by a create or by an update
  conditional on the resourceVersion read (optimistic concurrency): of two candidates racing,
  one succeeds and the other is refused with 409 Conflict.
- The leader renews every retry period; when no renewal succeeds for a renew deadline, it
  stops leading. A renew deadline plus a retry period shorter than the lease duration means the
  leader has stopped before any standby may take over.
- On stop the leader releases the Lease (holder emptied): a standby takes it instead of waiting
  for it to expire.
Two differences. A waiting candidate does not poll: it watches the Lease (this one object, from
the version it last read; resumed after a failure, read again when that version expired, as an
informer lists again), so it sees every renewal when it is made, takes a released Lease at once
and tries again exactly when the record it saw expires. Only while no watch can be opened (RBAC
without `watch` on Leases) does it read the Lease every retry period. And, on the safe side: a
leader that reads another holder in the Lease stops at once (client-go keeps retrying until its
renew deadline).

A candidate may publish `annotations` on the Lease while it holds it (where its replicas reach
it, say); every candidate reads the holder's as last observed (`holder_annotations`). A Lease it
creates may name an `owner` (an object of the component's that goes with it, such as its
ServiceAccount): the garbage collector then deletes the Lease once the component is gone.

A lost leadership is not won back in the same process: `run` returns, and the component stops
writing and exits (client-go's callers exit too), to start again as a standby.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from annex.api_errors import ApiError, WatchExpired, error_message, status_of
from annex.api_paths import group_path
from annex.kubeapi import ClusterApi
from annex.transport_errors import TransportError
from shared.api.builtin import LEASES

log = logging.getLogger(__name__)

JITTER_FACTOR = 1.2
"""A candidate retries after a retry period plus up to this factor of it (client-go's)."""
RECORD = ("holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime",
          "leaseTransitions")
"""The Lease's spec fields that make the election record."""
WATCH_SECONDS = 300
"""How long one watch of the Lease asks to last (the server ends it; a new one follows)."""
WATCH_BACKOFF = (0.5, 30.0)
"""Seconds before opening the watch again after it failed: the first, doubling to the last."""


@dataclass(frozen=True)
class ElectionTimings:
    """client-go's LeaderElectionConfig durations, in seconds, with its defaults."""

    lease_duration: float = 15.0
    """How long a standby waits after the record last changed before it takes the Lease (the
    record says it in whole seconds, rounded up)."""
    renew_deadline: float = 10.0
    """How long the leader keeps trying to renew before it stops leading."""
    retry_period: float = 2.0
    """Between two tries: the leader's renewals (and a standby's reads while it cannot watch
    the Lease)."""

    def __post_init__(self) -> None:
        if min(self.lease_duration, self.renew_deadline, self.retry_period) <= 0:
            raise ValueError("lease duration, renew deadline and retry period must be positive")
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("the lease duration must be greater than the renew deadline")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError(f"the renew deadline must be greater than {JITTER_FACTOR} retry "
                             "periods")


def candidate_identity(hostname: str | None = None) -> str:
    """The pod's name (its hostname) and a random suffix, as client-go components make theirs:
    a pod restarted under the same name is a new candidate, never the old holder."""
    return f"{hostname or socket.gethostname()}_{uuid.uuid4()}"


def micro_time(now: datetime) -> str:
    """A MicroTime as the API server writes it."""
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def resource_version(lease: dict[str, Any] | None) -> str | None:
    """The Lease's resourceVersion (None: no Lease read)."""
    if lease is None:
        return None
    return str((lease.get("metadata") or {}).get("resourceVersion") or "")


def election_record(lease: dict[str, Any]) -> dict[str, Any]:
    spec = lease.get("spec") or {}
    return {field: spec.get(field) for field in RECORD}


class LeaderElector:
    """One candidate for the Lease `namespace`/`name`, on the event loop of `api`'s first use
    (give it a client of its own: the leader's renewals must not queue behind a burst of
    reconciles in a shared client-side rate limiter)."""

    def __init__(self, api: ClusterApi, namespace: str, name: str, identity: str,
                 timings: ElectionTimings | None = None, *,
                 annotations: Mapping[str, str] | None = None,
                 owner: Mapping[str, str] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.timings = timings or ElectionTimings()
        self.annotations = dict(annotations or {})
        """Written on the Lease with each acquisition and renewal of this candidate's."""
        self.owner = dict(owner) if owner else None
        """The owner reference (apiVersion, kind, name, uid) of a Lease this candidate creates:
        an object of its namespace."""
        self._clock = clock
        self._wall_clock = wall_clock
        self._collection = group_path(*LEASES.resource, namespace)
        self._path = group_path(*LEASES.resource, namespace, name)
        self._lease: dict[str, Any] | None = None
        """The Lease as last read or written (its resourceVersion makes the next write
        conditional)."""
        self._observed: dict[str, Any] = {}
        self._observed_at = 0.0
        """When `_observed` last changed, on this candidate's clock."""
        self._changed = asyncio.Event()
        """Set by the watch when it saw the Lease change, or stopped seeing it."""
        self.watching = False
        """While waiting: the Lease's changes come by a watch (else it is read every retry
        period)."""
        self.leading = False
        """Between winning the Lease and losing (or releasing) it."""
        self.elected = asyncio.Event()
        """Set once this candidate leads (never cleared: a lost leadership ends the process)."""

    @property
    def holder(self) -> str:
        """The holder last observed ("" for none)."""
        return str(self._observed.get("holderIdentity") or "")

    @property
    def transitions(self) -> int:
        """The Lease's leaseTransitions last observed: how often leadership changed hands."""
        return int(self._observed.get("leaseTransitions") or 0)

    def holder_annotations(self) -> dict[str, str]:
        """The Lease's annotations as last read or written, while someone holds it (the
        holder's, as it published them); {} while nobody does."""
        if not self.holder or self._lease is None:
            return {}
        return dict((self._lease.get("metadata") or {}).get("annotations") or {})

    def describe(self) -> str:
        return f"Lease {self.namespace}/{self.name}"

    def _metadata(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        """`metadata` with this candidate's annotations, and its owner when it has none."""
        written = dict(metadata)
        if self.annotations:
            written["annotations"] = {**(metadata.get("annotations") or {}), **self.annotations}
        if self.owner and not metadata.get("ownerReferences"):
            written["ownerReferences"] = [self.owner]
        return written

    # --- one try -------------------------------------------------------------------------------

    def _observe(self, lease: dict[str, Any] | None, now: float) -> None:
        """Note `lease` (None: there is none) and when its record changed."""
        self._lease = lease
        record = election_record(lease) if lease is not None else {}
        if record != self._observed:
            self._observed, self._observed_at = record, now

    def expires_at(self) -> float:
        """When the record last observed expires, on this candidate's clock: its
        leaseDurationSeconds (this candidate's lease duration when it has none) after it was
        seen to change, as client-go counts."""
        seconds = self._observed.get("leaseDurationSeconds")
        duration = (seconds if isinstance(seconds, int) and seconds > 0
                    else self.timings.lease_duration)
        return self._observed_at + duration

    def held_by_another(self, now: float) -> bool:
        """Another candidate holds the Lease, renewed within its duration as seen from here."""
        return self.holder not in ("", self.identity) and now < self.expires_at()

    async def try_acquire_or_renew(self) -> bool:
        """Take or renew the Lease once: True when this candidate holds it afterwards."""
        now = self._clock()
        stamp = micro_time(self._wall_clock())
        record = {"holderIdentity": self.identity,
                  "leaseDurationSeconds": max(1, math.ceil(self.timings.lease_duration)),
                  "acquireTime": stamp, "renewTime": stamp}
        try:
            lease = await self.api.find(self._path)
            if lease is None:
                created = await self.api.create(self._collection, {
                    **LEASES.type_meta(),
                    "metadata": self._metadata({"name": self.name,
                                                "namespace": self.namespace}),
                    "spec": {**record, "leaseTransitions": 0}})
                self._observe(created, now)
                return True
            self._observe(lease, now)
            if self.held_by_another(now):
                return False
            if self.holder == self.identity:
                record.update(acquireTime=self._observed.get("acquireTime") or stamp,
                              leaseTransitions=self._observed.get("leaseTransitions") or 0)
            else:
                record["leaseTransitions"] = int(self._observed.get("leaseTransitions") or 0) + 1
            # A replace carries the resourceVersion read: a concurrent write makes it a 409.
            updated = await self.api.replace(self._path, {
                **lease, "metadata": self._metadata(lease.get("metadata") or {}),
                "spec": {**(lease.get("spec") or {}), **record}})
            self._observe(updated, self._clock())
            return True
        except (ApiError, TransportError, TimeoutError) as error:
            if status_of(error) == 409:
                log.debug("%s: another candidate wrote first", self.describe())
            else:
                log.warning("%s: cannot read or write it: %s", self.describe(),
                            error_message(error))
            return False

    # --- the loops -----------------------------------------------------------------------------

    async def run(self, lead: Callable[[], None] = lambda: None) -> None:
        """Acquire the Lease, `lead()`, then renew it until leadership is lost, and return then.
        Cancel it to stop (then `release`)."""
        await self._acquire()
        self.leading = True
        self.elected.set()
        log.info("%s acquired: %s leads", self.describe(), self.identity)
        lead()
        try:
            await self._renew()
        finally:
            self.leading = False

    def campaign(self, lead: Callable[[], None], lost: Callable[[], None]
                 ) -> asyncio.Task[None]:
        """`run` as a task of its own (cancel it to stop, then `release`): `lead()` once this
        candidate leads, `lost()` once it no longer does (the component then stops writing and
        exits, to start again as a standby)."""
        task = asyncio.create_task(self.run(lead), name=f"election-{self.name}")
        task.add_done_callback(lambda done: None if done.cancelled() else lost())
        return task

    async def _acquire(self) -> None:
        log.info("%s: %s waits to lead", self.describe(), self.identity)
        reported = None
        follower: asyncio.Task[None] | None = None
        try:
            while not await self.try_acquire_or_renew():
                if self.holder != reported:
                    reported = self.holder
                    log.info("%s is held by %s", self.describe(), reported or "nobody")
                if follower is None:  # from the version just read
                    follower = asyncio.create_task(self._follow(),
                                                   name=f"election-watch-{self.name}")
                await self._until_worth_trying()
        finally:
            if follower is not None:
                follower.cancel()
                await asyncio.gather(follower, return_exceptions=True)
            self.watching = False

    async def _until_worth_trying(self) -> None:
        """Until the Lease may be taken: the watch saw its holder release it (or delete it), or
        the record observed expired; no longer than `next_try_in` while no watch is open, or
        when the Lease was free at the failed try (the API server may have failed it)."""
        now = self._clock()
        poll_at = now + self.next_try_in(now)
        held = self.held_by_another(now)
        while True:
            if not held:
                wake_at = poll_at
            elif self.watching:
                wake_at = self.expires_at()
            else:
                wake_at = min(poll_at, self.expires_at())
            self._changed.clear()
            try:
                async with asyncio.timeout(max(0.0, wake_at - now)):
                    await self._changed.wait()
            except TimeoutError:
                return
            now, was_held = self._clock(), held
            held = self.held_by_another(now)
            if was_held and not held:
                return

    async def _follow(self) -> None:
        """Watch the Lease while waiting, noting each change as it comes: this one object (a
        fieldSelector on its name, which RBAC's resourceNames authorize), from the version last
        seen: after a failure, from the same version again (a backoff later), and from a new read
        once that version expired (410), as client-go's reflector resumes and lists again. While
        it cannot be opened (a Role without `watch`), `watching` is False and the candidate
        polls."""
        query = {"fieldSelector": f"metadata.name={self.name}"}
        version: str | None = resource_version(self._lease)
        delay = WATCH_BACKOFF[0]
        while True:
            try:
                if version is None:
                    lease = await self.api.find(self._path)
                    self._observe(lease, self._clock())
                    self._changed.set()
                    version = resource_version(lease) or ""  # absent: from now on
                self.watching = True
                async for event in self.api.watch(self._collection, version, WATCH_SECONDS,
                                                  query):
                    lease = event.get("object") or {}
                    version = resource_version(lease) or version
                    if event.get("type") != "BOOKMARK":
                        self._observe(None if event.get("type") == "DELETED" else lease,
                                      self._clock())
                        self._changed.set()
                    delay = WATCH_BACKOFF[0]
            except WatchExpired:
                version = None
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - polled meanwhile, watched again later
                (log.warning if delay == WATCH_BACKOFF[0] else log.debug)(
                    "%s: cannot watch it, reading it every retry period meanwhile: %s",
                    self.describe(), error_message(error))
                self.watching = False
                self._changed.set()
                await asyncio.sleep(delay)
                delay = min(delay * 2, WATCH_BACKOFF[1])

    def next_try_in(self, now: float) -> float:
        """Seconds until a candidate that cannot watch tries again: a jittered retry period,
        as client-go waits, but no later than the moment the holder's record, as last observed,
        expires (a killed leader's Lease is taken then, not up to a retry period after)."""
        period = self.timings.retry_period
        jittered = period + random.random() * JITTER_FACTOR * period
        if not self.holder or self.holder == self.identity:
            return jittered
        return max(0.0, min(jittered, self.expires_at() - now))

    async def _renew(self) -> None:
        """Renew every retry period; return once no renewal succeeded for a renew deadline,
        or another holder is seen."""
        timings = self.timings
        while True:
            deadline = self._clock() + timings.renew_deadline
            while True:
                try:
                    # Not asyncio.wait_for: on Python 3.11 it loses a cancel that comes with
                    # the renewal's answer, and the leader would renew on after its stop.
                    async with asyncio.timeout(max(0.0, deadline - self._clock())):
                        renewed = await self.try_acquire_or_renew()
                except TimeoutError:
                    renewed = False
                if renewed:
                    break
                if self.holder not in ("", self.identity):
                    log.error("%s was taken by %s: stopped leading", self.describe(),
                              self.holder)
                    return
                if self._clock() >= deadline:
                    log.error("%s not renewed for %.1fs: stopped leading", self.describe(),
                              timings.renew_deadline)
                    return
                await asyncio.sleep(min(timings.retry_period, deadline - self._clock()))
            await asyncio.sleep(timings.retry_period)

    async def release(self) -> bool:
        """Give the Lease up if this candidate holds it (holder emptied, as client-go does),
        so that a standby takes it at its next try. False when it could not be written."""
        self.leading = False
        try:
            async with asyncio.timeout(self.timings.renew_deadline):
                await self._release()
        except (ApiError, TransportError, TimeoutError) as error:
            log.warning("%s not released: %s", self.describe(), error_message(error))
            return False
        return True

    async def _release(self) -> None:
        lease = self._lease
        for _ in range(2):
            if lease is None or election_record(lease)["holderIdentity"] != self.identity:
                return
            stamp = micro_time(self._wall_clock())
            spec = {**(lease.get("spec") or {}), "holderIdentity": "",
                    "leaseDurationSeconds": 1, "acquireTime": stamp, "renewTime": stamp}
            try:
                released = await self.api.replace(self._path, {**lease, "spec": spec})
            except ApiError as error:
                if error.status != 409:
                    raise
                # A renewal cancelled in flight may have landed: read what it wrote.
                lease = await self.api.find(self._path)
                continue
            self._observe(released, self._clock())
            log.info("%s released", self.describe())
            return
        raise ApiError(409, {"message": "the Lease kept changing"})
