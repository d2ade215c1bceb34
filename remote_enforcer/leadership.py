"""Which replica decides what only one may decide: a consumer's quota.

Every replica serves the admission webhooks, but the admissions that count against a quota (a
ShadowPod created, a claim created or grown) are decided by the leader alone, from its one
ledger, serialized per consumer, with its reservations for what it admitted and has not seen
stored yet: two replicas admitting from ledgers of their own would each count the other's
admissions only once their watches show them, and together exceed the quota. A replica that
does not lead forwards such a review to the leader, over the webhook's HTTPS, to the address
the leader publishes on its election Lease (`LEADER_WEBHOOK_ANNOTATION`), and answers what the
leader answers. While no replica leads (a leader gone, until its Lease expires) or the leader
cannot be reached, it waits up to `FORWARD_SECONDS` for one, then refuses, saying why: the
consumer's agent tries again with backoff.

A forwarded review is answered only by a replica that decides: one that no longer does answers
503, and the forwarder looks for the leader again (never a second hop). A leader that stops
stops deciding first (`stop_deciding`), so that it hands over nothing it is still counting.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import aiohttp
from cryptography import x509

from annex.api_errors import error_message
from annex.leader import LeaderElector

log = logging.getLogger(__name__)

LEADER_WEBHOOK_ANNOTATION = "enforcer.annex.io/webhook"
"""On the election Lease: the base URL of the holder's webhook server."""
FORWARDED_HEADER = "X-Annex-Forwarded-By"
"""On a forwarded review: the identity of the replica that forwarded it."""
FORWARD_SECONDS = 5.0
"""How long a forwarded review may wait for a leader to answer it: half the webhook's default
timeout (10 s), so that the refusal, not the API server's timeout, tells the consumer why."""
RETRY_SECONDS = 0.1
"""Between two looks for a leader that answers."""


def webhook_url(address: str, port: int) -> str:
    """The base URL of a replica's webhook server."""
    host = f"[{address}]" if ":" in address else address
    return f"https://{host}:{port}"


class PeerTLS:
    """How one replica verifies another's webhook, both serving the certificate of one Secret:
    the peer must present a certificate of the CA in `ca.crt` beside `cert` (as the chart's
    Secret and cert-manager's hold it) for a name the replica's own certificate holds (its first
    DNS name, else its first address). Loaded again when the files change (a rotation)."""

    def __init__(self, cert: str) -> None:
        self.cert = Path(cert)
        self.ca = self.cert.with_name("ca.crt")
        self._loaded: tuple[tuple[float, float], ssl.SSLContext, str] | None = None

    def context(self) -> tuple[ssl.SSLContext, str]:
        """The client context and the name to check the peer's certificate for."""
        stamp = (self.cert.stat().st_mtime, self.ca.stat().st_mtime)
        if self._loaded is None or self._loaded[0] != stamp:
            context = ssl.create_default_context(cafile=str(self.ca))
            self._loaded = (stamp, context, certificate_name(self.cert.read_bytes()))
        return self._loaded[1], self._loaded[2]


def certificate_name(pem: bytes) -> str:
    """A name the certificate is for: its first DNS name, else its first IP address."""
    certificate = x509.load_pem_x509_certificate(pem)
    try:
        names = certificate.extensions.get_extension_for_class(
            x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        names = None
    if names is not None:
        for name in [*names.get_values_for_type(x509.DNSName),
                     *map(str, names.get_values_for_type(x509.IPAddress))]:
            return name
    raise ValueError("the webhook certificate names no host (no subjectAltName)")


class NotDeciding(Exception):
    """The replica a review was forwarded to does not decide (any more)."""


class Leadership:
    """This replica's part: it decides (`deciding`) while it leads and has not begun to stop;
    otherwise `elsewhere` gets the leader's verdict. Without an elector (one replica), it
    always decides."""

    def __init__(self, elector: LeaderElector | None = None, peers: PeerTLS | None = None,
                 counted: Callable[[str], None] = lambda result: None) -> None:
        self.elector = elector
        self.peers = peers
        self.counted = counted
        """Told of each review forwarded: "answered" by a leader, or "unanswered"."""
        self._stopping = False
        self._session: aiohttp.ClientSession | None = None

    def deciding(self) -> bool:
        return not self._stopping and (self.elector is None or self.elector.leading)

    def stop_deciding(self) -> None:
        self._stopping = True

    def leader_url(self) -> str | None:
        """The webhook of the replica that leads, as its Lease says (None: none known, or
        this one)."""
        if self.elector is None or self.elector.holder in ("", self.elector.identity):
            return None
        return self.elector.holder_annotations().get(LEADER_WEBHOOK_ANNOTATION)

    async def elsewhere(self, path: str, request: Mapping[str, Any]) -> tuple[bool, str] | None:
        """None when this replica decides the review `request` (of the webhook at `path`);
        else the leader's (allowed, message), or a refusal once none answered in time."""
        if self.deciding():
            return None
        assert self.elector is not None and self.peers is not None
        deadline = time.monotonic() + FORWARD_SECONDS
        why = "no replica leads"
        while time.monotonic() < deadline:
            if self.deciding():
                return None
            url = self.leader_url()
            if url is not None:
                try:
                    verdict = await self._forward(url + path, request,
                                                  deadline - time.monotonic())
                    self.counted("answered")
                    return verdict
                except (NotDeciding, aiohttp.ClientError, TimeoutError, OSError,
                        ValueError) as error:
                    why = f"the leader {self.elector.holder} at {url}: {error_message(error)}"
            await asyncio.sleep(RETRY_SECONDS)
        self.counted("unanswered")
        log.warning("review of %s %s/%s refused: no leader answered within %gs (%s)",
                    request.get("operation"), request.get("namespace"), request.get("name"),
                    FORWARD_SECONDS, why)
        return False, (f"the quota is counted by the enforcer replica that leads ({why}): "
                       f"try again")

    async def _forward(self, url: str, request: Mapping[str, Any], timeout: float
                       ) -> tuple[bool, str]:
        assert self.elector is not None and self.peers is not None
        context, name = self.peers.context()
        if self._session is None:
            self._session = aiohttp.ClientSession()
        async with self._session.post(
                url, json={"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                           "request": dict(request)},
                headers={FORWARDED_HEADER: self.elector.identity}, ssl=context,
                server_hostname=name, timeout=aiohttp.ClientTimeout(total=max(0.1, timeout))
        ) as answer:
            if answer.status == 503:
                raise NotDeciding("it does not lead (any more)")
            answer.raise_for_status()
            response = (await answer.json()).get("response") or {}
        if not isinstance(response.get("allowed"), bool):
            raise ValueError("it answered no verdict")
        return response["allowed"], str((response.get("status") or {}).get("message") or "")

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
