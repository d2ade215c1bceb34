"""The CertificateSigningRequest `approval` subresource with the CertificateApproval admission
check, and kube-controller-manager's csrsigning controller for kubernetes.io/kubelet-serving.

Approving needs, besides update on certificatesigningrequests/approval, the `approve` verb on
`signers` (certificates.k8s.io) named after the request's signerName or its `<domain>/*`
(IsAuthorizedForSignerName). kubelet-serving requests are never approved automatically on a real
cluster: an administrator or an approver must. An approved request is then issued from the
cluster CA, or marked Failed when it is not a valid kubelet-serving request.
"""

from __future__ import annotations

import base64
import datetime
import logging
from dataclasses import dataclass
from typing import Any

import trustme
from cryptography import x509
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from kubesim import errors
from kubesim.apiserver import (
    SYSTEM_USER,
    ApiServer,
    Obj,
    RequestAttributes,
    SubresourceRequest,
    User,
    copy_json,
)
from kubesim.certificates import (
    DEFAULT_SIGNING_DURATION,
    KUBELET_SERVING,
    kubelet_serving_errors,
    request_of,
    sign,
)

log = logging.getLogger("kubesim.csrsigning")
GROUP = "certificates.k8s.io"


def authorized_for_signer(api: ApiServer, user: User, verb: str, signer: str) -> bool:
    """IsAuthorizedForSignerName: `verb` on signers/<signerName>, or on signers/<domain>/*."""
    for name in (signer, signer.split("/", 1)[0] + "/*"):
        attributes = RequestAttributes(user, verb, GROUP, "*", "signers", "", "", name)
        if api.authorizer.authorize(attributes)[0]:
            return True
    return False


@dataclass
class Signer:
    """The csrsigning controller's kubelet-serving signer (--cluster-signing-duration)."""

    api: ApiServer
    ca: trustme.CA | None = None
    duration: datetime.timedelta = DEFAULT_SIGNING_DURATION

    async def serve(self, request: SubresourceRequest) -> Obj | str:
        api, kind, name = self.api, request.kind, request.name
        if request.verb == "get":
            return await api.get(kind, "", name, subresource="approval", user=request.user)
        if request.verb not in ("update", "patch"):
            raise errors.method_not_supported(kind.group_resource, request.verb)
        api._authorize(request.user, request.verb, kind, "", name, "approval")
        current = await api.get(kind, "", name)
        signer = str((current.get("spec") or {}).get("signerName", ""))
        if not authorized_for_signer(api, request.user, "approve", signer):
            raise errors.forbidden(kind.group_resource, name, f"user not permitted to approve "
                                   f"requests with signerName \"{signer}\"")
        if request.verb == "update":
            stored = await api.update(kind, "", name, request.body, subresource="approval",
                                      user=request.user)
        else:
            stored = await api.patch(kind, "", name, request.body, request.content_type,
                                     subresource="approval", user=request.user)
        api._track(self.issue(name))
        return stored

    async def issue(self, name: str) -> None:
        """Sign `name` if approved, not failed, not yet issued and ours to sign."""
        kind = self.api.kinds.get(GROUP, "v1", "certificatesigningrequests")
        assert kind is not None
        obj = copy_json(await self.api.get(kind, "", name))  # get hands out the stored object
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        types = {c.get("type") for c in status.get("conditions") or []}
        if (spec.get("signerName") != KUBELET_SERVING or self.ca is None
                or "Approved" not in types or "Denied" in types or "Failed" in types
                or status.get("certificate")):
            return
        request = request_of(obj)
        usages = list(spec.get("usages") or [])
        why = kubelet_serving_errors(request, usages)
        if why:
            log.info("kubelet-serving CSR %s refused: %s", name, why)
            status.setdefault("conditions", []).append({
                "type": "Failed", "status": "True", "reason": "SignerValidationFailure",
                "message": why})
        else:
            ca_cert = x509.load_pem_x509_certificate(self.ca.cert_pem.bytes())
            ca_key: Any = load_pem_private_key(self.ca.private_key_pem.bytes(), None)
            status["certificate"] = base64.b64encode(sign(
                request, usages, spec.get("expirationSeconds"), ca_cert, ca_key,
                self.duration)).decode()
        obj["status"] = status
        await self.api.update(kind, "", name, obj, subresource="status", user=SYSTEM_USER)


def install_certificates(api: ApiServer) -> Signer:
    kind = api.kinds.get(GROUP, "v1", "certificatesigningrequests")
    assert kind is not None
    signer = Signer(api)
    api.register_subresource(kind, "approval", signer.serve)
    return signer
