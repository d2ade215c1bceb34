"""The validating webhook for ShadowPods (AdmissionReview v1 over HTTPS).

Rules (shared.forge.tenancy): the origin label must name the consumer the twin namespace
belongs to; the pod must fit the consumer's pod policy (shared.pod_policy: the offloading
allow-list and the Pod Security level the provider chose); spec updates are limited to what a
pod allows; the consumer's Quota is enforced (shared.quota) against the usage the ledger keeps
from a watch of ShadowPods (no list per admission). Deletes are always allowed.

No over-admission under concurrent creates: the quota is decided by one replica, the leader
(remote_enforcer.leadership: the others forward it those reviews); its admissions of one
consumer are serialized, and a ShadowPod admitted but not yet seen by the ledger counts through
a reservation until it is.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from aiohttp import web

from annex import tracing
from annex.kubeapi import ClusterApi
from annex.webhooks import admission_application
from annex.webhooks import admission_request as read_admission_request
from remote_enforcer.claim_admission import WEBHOOK_PATH as CLAIMS_WEBHOOK_PATH
from remote_enforcer.claim_admission import ClaimAdmission
from remote_enforcer.consumers import Consumers
from remote_enforcer.leadership import FORWARDED_HEADER, Leadership
from remote_enforcer.ledger import UsageLedger
from remote_enforcer.metrics import Metrics
from remote_enforcer.object_admission import WEBHOOK_PATH as NETWORK_WEBHOOK_PATH
from remote_enforcer.object_admission import ObjectAdmission
from shared import quota as quota_rules
from shared.admission import review_response
from shared.api.quota import LimitsEnforcement
from shared.forge import enforcement
from shared.forge.tenancy import origin_problem, pod_policy_problem
from shared.pools import Pool, pool_problem

log = logging.getLogger(__name__)

WEBHOOK_PATH = "/validate/shadowpods"
RESERVATION_SECONDS = 30.0  # an admitted create that never got stored stops counting after this


@dataclass
class Reservation:
    requested: dict[str, Decimal]
    expires: float
    uid: str = ""  # the object's uid when admission saw one (set before validation)


class Admission:
    """Decides from the caches the enforcer's list+watches keep (`consumers`, the ledger): an
    admission reads no object from the API server, except a namespace the cache does not hold
    yet."""

    def __init__(self, api: ClusterApi, ledger: UsageLedger, consumers: Consumers,
                 leadership: Leadership | None = None, pools: Sequence[Pool] = ()) -> None:
        self.api = api
        self.pools = tuple(pools)
        self.ledger = ledger
        self.consumers = consumers
        self.leadership = leadership or Leadership()
        ledger.on_observed = self._observed
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._reservations: defaultdict[str, dict[tuple[str, str], Reservation]] = (
            defaultdict(dict))

    async def review(self, request: Mapping[str, Any]) -> tuple[bool, str]:
        """(allowed, message) for one AdmissionReview request."""
        operation = request.get("operation")
        if operation not in ("CREATE", "UPDATE"):
            return True, ""
        obj = request.get("object") or {}
        namespace = request.get("namespace") or (obj.get("metadata") or {}).get("namespace", "")
        consumer = self.consumers.twin_consumer(await self.consumers.namespace(self.api,
                                                                               namespace))
        problem = origin_problem((obj.get("metadata") or {}).get("labels") or {}, namespace,
                                 consumer)
        old = request.get("oldObject") if operation == "UPDATE" else None
        problem = problem or pool_problem(
            self.pools, obj, old, None if consumer is None else self.consumers.lent_pools(consumer))
        if problem is None and old is not None:
            problem = enforcement.forbidden_spec_change(
                (old.get("spec") or {}).get("pod") or {}, (obj.get("spec") or {}).get("pod") or {})
        if problem is None and consumer is not None:
            problem = pod_policy_problem(self.consumers.pod_policy(consumer), consumer, obj, old)
        if problem is not None:
            return False, problem
        if operation == "CREATE" and consumer is not None:
            verdict = await self.leadership.elsewhere(WEBHOOK_PATH, request)
            if verdict is not None:
                return verdict
            return await self._admit_within_quota(consumer, namespace, obj,
                                                  bool(request.get("dryRun")))
        return True, ""

    def reserved(self) -> int:
        """Admitted creates the ledger has not seen stored yet (nor given up on)."""
        now = time.monotonic()
        return sum(1 for reservations in self._reservations.values()
                   for reservation in reservations.values() if reservation.expires >= now)

    def _observed(self, consumer: str, key: tuple[str, str], uid: str) -> None:
        """A reservation ends when the ledger sees the object it was made for."""
        reservation = self._reservations[consumer].get(key)
        if reservation is not None and reservation.uid in ("", uid):
            del self._reservations[consumer][key]

    def _used(self, consumer: str, creating: tuple[str, str]) -> dict[str, Decimal]:
        """The consumer's usage: its non-terminal ShadowPods plus unobserved reservations, but
        the one of the ShadowPod `creating` itself (a create a later admission step refused,
        tried again)."""
        reservations = self._reservations[consumer]
        now = time.monotonic()
        for key in [k for k, r in reservations.items() if r.expires < now]:
            del reservations[key]
        return quota_rules.total_usage(
            [self.ledger.usage(consumer),
             *(r.requested for key, r in reservations.items() if key != creating)])

    async def _admit_within_quota(self, consumer: str, namespace: str, obj: Mapping[str, Any],
                                  dry_run: bool) -> tuple[bool, str]:
        # No Quota is no exception: the offer limits the consumer (closed by default).
        spec = (self.consumers.quota(consumer) or {}).get("spec") or {}
        limits = await self.consumers.limits(consumer)
        await self.ledger.synced.wait()
        meta = obj.get("metadata") or {}
        key = (namespace, meta.get("name", ""))
        async with self._locks[consumer]:
            used = self._used(consumer, key)
            decision = quota_rules.admit(
                LimitsEnforcement(spec.get("limitsEnforcement") or "None"),
                bool(spec.get("cordoned")), limits, used,
                (obj.get("spec") or {}).get("pod") or {})
            if decision.allowed and not dry_run:
                self._reservations[consumer][key] = Reservation(
                    decision.requested, time.monotonic() + RESERVATION_SECONDS,
                    str(meta.get("uid") or ""))
            return decision.allowed, decision.message


Reviewer = Callable[[Mapping[str, Any]], Awaitable[tuple[bool, str]]]


def webhook_app(admission: Admission, metrics: Metrics,
                claims: ClaimAdmission | None = None,
                objects: ObjectAdmission | None = None) -> web.Application:
    leadership = admission.leadership

    def route(path: str, review: Reviewer) -> Callable[[web.Request], Awaitable[web.Response]]:
        review = tracing.traced_review(path, review)  # decided once, when the app is built

        async def validate(request: web.Request) -> web.Response:
            if FORWARDED_HEADER in request.headers and not leadership.deciding():
                # forwarded to the leader, which this replica no longer is: never a second hop
                return web.Response(status=503, text="not the leader")
            admission_request = await read_admission_request(request)
            try:
                allowed, message = await review(admission_request)
            except Exception as error:  # noqa: BLE001 - answer rather than drop the connection
                log.exception("admission failed")
                allowed, message = False, f"the enforcer could not decide: {error}"
            metrics.count("admissions_total", ("allowed" if allowed else "denied",))
            if not allowed:
                log.info("denied %s %s/%s: %s", admission_request.get("operation"),
                         admission_request.get("namespace"), admission_request.get("name"),
                         message)
            return web.json_response(review_response(str(admission_request.get("uid", "")),
                                                     denied=None if allowed else message))
        return validate

    app = admission_application([metrics.webhooks.middleware])
    app.router.add_post(WEBHOOK_PATH, route(WEBHOOK_PATH, admission.review))
    if claims is not None:
        app.router.add_post(CLAIMS_WEBHOOK_PATH, route(CLAIMS_WEBHOOK_PATH, claims.review))
    if objects is not None:
        app.router.add_post(NETWORK_WEBHOOK_PATH, route(NETWORK_WEBHOOK_PATH, objects.review))
    return app


async def start_webhook(admission: Admission, metrics: Metrics, address: str, port: int,
                        ssl_context: ssl.SSLContext,
                        claims: ClaimAdmission | None = None,
                        objects: ObjectAdmission | None = None) -> web.AppRunner:
    runner = web.AppRunner(webhook_app(admission, metrics, claims, objects), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, address, port, ssl_context=ssl_context).start()
    return runner
