"""The kubelet API's serving certificate from the home cluster's kubernetes.io/kubelet-serving
signer, as the kubelet's certificate manager obtains and rotates it (serverTLSBootstrap).

A fresh key and a CertificateSigningRequest for CN system:node:<node>, O system:nodes, the node
name and the advertised address as SANs. kubelet-serving requests are not approved automatically
on a real cluster: an administrator (`kubectl certificate approve`) or an approver must. Until the
first certificate is issued the server keeps serving its self-signed one, so that API servers
without --kubelet-certificate-authority (which do not verify kubelets) reach logs and exec at
once; the issued certificate replaces it for new connections, without a restart, and is renewed
at 70-90 % of its life (jittered, so a fleet of nodes does not renew at once).
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import logging
import random
import ssl
from collections.abc import Callable

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from annex.api_errors import ApiError
from annex.kubeapi import ClusterApi
from home_agent.kubelet.certs import load_pair, san

log = logging.getLogger("home_agent.kubelet")

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
SIGNER = "kubernetes.io/kubelet-serving"
USAGES = ["digital signature", "key encipherment", "server auth"]
RETRY_AFTER_REFUSAL = 60.0  # seconds before a new request once one is denied or fails
POLL = 2.0  # seconds between looks at a pending request


def serving_request(node_name: str, addresses: list[str]) -> tuple[bytes, bytes]:
    """(PEM CSR, PEM private key) of a kubelet serving certificate for `node_name`."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"),
                         x509.NameAttribute(NameOID.COMMON_NAME, f"system:node:{node_name}")])
    hosts = list(dict.fromkeys([node_name, *addresses]))
    request = (x509.CertificateSigningRequestBuilder().subject_name(subject)
               .add_extension(x509.SubjectAlternativeName([san(h) for h in hosts]),
                              critical=False)
               .sign(key, hashes.SHA256()))
    return (request.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


def rotation_deadline(certificate: x509.Certificate, received: datetime.datetime,
                      jitter: Callable[[float, float], float] = random.uniform
                      ) -> datetime.datetime:
    """When to renew: 70-90 % into the certificate's life. The life counts from when it was
    received when that is later than notBefore: signers backdate notBefore (5 minutes for
    kube-controller-manager), which on a short certificate would put the deadline past expiry."""
    start = max(certificate.not_valid_before_utc, received)
    life = certificate.not_valid_after_utc - start
    return start + life * jitter(0.7, 0.9)


def outcome(csr: dict[str, object]) -> tuple[str, str]:
    """("issued", certificate base64) | ("refused", why) | ("pending", "")."""
    status = csr.get("status") or {}
    assert isinstance(status, dict)
    for condition in status.get("conditions") or []:
        if condition.get("type") in ("Denied", "Failed"):
            return "refused", (f"{condition['type']}: {condition.get('reason', '')} "
                               f"{condition.get('message', '')}").strip()
    if status.get("certificate"):
        return "issued", str(status["certificate"])
    return "pending", ""


class ServingCertificates:
    """Requests, installs and renews the serving certificate of `context`."""

    def __init__(self, home: ClusterApi, context: ssl.SSLContext, node_name: str,
                 addresses: list[str], expiration_seconds: int | None = None) -> None:
        self.home = home
        self.context = context
        self.node_name = node_name
        self.addresses = addresses
        self.expiration_seconds = expiration_seconds
        self.issued = 0  # certificates installed so far

    async def run(self) -> None:
        while True:
            try:
                certificate = await self._obtain()
            except asyncio.CancelledError:
                raise
            except (ApiError, OSError, ValueError) as error:
                log.error("kubelet serving certificate: the request failed (%s); retrying in "
                          "%.0f s", error, RETRY_AFTER_REFUSAL)
                await asyncio.sleep(RETRY_AFTER_REFUSAL)
                continue
            if certificate is None:
                await asyncio.sleep(RETRY_AFTER_REFUSAL)
                continue
            now = datetime.datetime.now(datetime.UTC)
            deadline = rotation_deadline(certificate, now)
            log.info("kubelet serving certificate installed (expires %s); renewal at %s",
                     certificate.not_valid_after_utc.isoformat(), deadline.isoformat())
            await asyncio.sleep(max(0.0, (deadline - now).total_seconds()))

    async def _obtain(self) -> x509.Certificate | None:
        request, key = serving_request(self.node_name, self.addresses)
        spec: dict[str, object] = {
            "request": base64.b64encode(request).decode(), "signerName": SIGNER,
            "usages": USAGES}
        if self.expiration_seconds is not None:
            spec["expirationSeconds"] = self.expiration_seconds
        created = await self.home.create(CSRS, {
            "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"generateName": f"{self.node_name}-serving-"}, "spec": spec})
        name = created["metadata"]["name"]
        log.warning("kubelet serving certificate: CertificateSigningRequest %s (signer %s) waits "
                    "for approval; kubelet-serving requests are not approved automatically: an "
                    "administrator or an approver must approve it: kubectl certificate approve %s",
                    name, SIGNER, name)
        while True:
            state, detail = outcome(await self.home.get(f"{CSRS}/{name}"))
            if state == "refused":
                log.error("kubelet serving certificate: CertificateSigningRequest %s was refused "
                          "(%s); the self-signed certificate stays; a new request follows in "
                          "%.0f s", name, detail, RETRY_AFTER_REFUSAL)
                return None
            if state == "issued":
                return self._install(base64.b64decode(detail), key)
            await asyncio.sleep(POLL)

    def _install(self, pem: bytes, key: bytes) -> x509.Certificate:
        certificate = x509.load_pem_x509_certificate(pem)
        self.issued += 1
        load_pair(self.context, pem, key)  # new handshakes use it; open connections keep theirs
        return certificate
