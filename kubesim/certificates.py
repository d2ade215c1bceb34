"""certificates.k8s.io/v1 CertificateSigningRequest: the registry strategy (validation, what the
main, status and approval writes may change) and the signing of a kubelet-serving request.

After pkg/registry/certificates/certificates/strategy.go, pkg/apis/certificates/validation and,
for the signer, kube-controller-manager's csrsigning controller (pkg/controller/certificates/
signer and authority) with the kubelet-serving checks of ValidateKubeletServingCSR.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kubesim.errors import FieldCause
from kubesim.strategies import Strategy, _keep

Obj = dict[str, Any]

KUBELET_SERVING = "kubernetes.io/kubelet-serving"
APPROVAL_TYPES = ("Approved", "Denied")
KNOWN_USAGES = (
    "signing", "digital signature", "content commitment", "key encipherment", "key agreement",
    "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any",
    "server auth", "client auth", "code signing", "email protection", "s/mime",
    "ipsec end system", "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing",
    "microsoft sgc", "netscape sgc",
)
MIN_EXPIRATION_SECONDS = 600
# kube-controller-manager's --cluster-signing-duration default, and the authority's backdating
DEFAULT_SIGNING_DURATION = datetime.timedelta(days=365)
BACKDATE = datetime.timedelta(minutes=5)
SHORT = datetime.timedelta(hours=8)  # certificates shorter than this keep their full end time
_SIGNER_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*"
                          r"[A-Za-z0-9])?$")


def parse_request(pem: str) -> x509.CertificateSigningRequest:
    """The PEM CSR of spec.request (ParseCSR: one CERTIFICATE REQUEST block, valid signature)."""
    if "-----BEGIN CERTIFICATE REQUEST-----" not in pem:
        raise ValueError("PEM block type must be CERTIFICATE REQUEST")
    request = x509.load_pem_x509_csr(pem.encode())
    if not request.is_signature_valid:
        raise ValueError("x509: ECDSA verification failure")
    return request


def _request_pem(spec: Obj) -> str:
    import base64

    raw = spec.get("request") or ""
    try:
        return base64.b64decode(raw, validate=True).decode() if isinstance(raw, str) else ""
    except ValueError:
        return ""


def _spec_errors(spec: Obj) -> list[FieldCause]:
    causes: list[FieldCause] = []
    pem = _request_pem(spec)
    if not spec.get("request"):
        causes.append(FieldCause("spec.request", "Required value", ""))
    else:
        try:
            parse_request(pem)
        except ValueError as error:
            causes.append(FieldCause("spec.request", "Invalid value", str(error), "<request>"))
    signer = spec.get("signerName") or ""
    if not signer:
        causes.append(FieldCause("spec.signerName", "Required value", ""))
    elif not _SIGNER_NAME.match(signer):
        causes.append(FieldCause("spec.signerName", "Invalid value",
                                 "must be a fully qualified domain and path of the form "
                                 "'example.com/signer-name'", signer))
    usages = spec.get("usages") or []
    if not usages:
        causes.append(FieldCause("spec.usages", "Required value", ""))
    seen: set[str] = set()
    for index, usage in enumerate(usages):
        if usage not in KNOWN_USAGES:
            causes.append(FieldCause(f"spec.usages[{index}]", "Unsupported value", "supported "
                                     "values: " + ", ".join(f'"{u}"' for u in KNOWN_USAGES),
                                     usage))
        elif usage in seen:
            causes.append(FieldCause(f"spec.usages[{index}]", "Duplicate value", "", usage))
        seen.add(usage)
    seconds = spec.get("expirationSeconds")
    if seconds is not None and (not isinstance(seconds, int) or seconds < MIN_EXPIRATION_SECONDS):
        causes.append(FieldCause("spec.expirationSeconds", "Invalid value",
                                 "may not specify a duration less than 600 seconds (10 minutes)",
                                 seconds))
    return causes


def _status_errors(status: Obj) -> list[FieldCause]:
    causes: list[FieldCause] = []
    conditions = status.get("conditions") or []
    types: list[str] = []
    for index, condition in enumerate(conditions):
        kind = condition.get("type") or ""
        path = f"status.conditions[{index}]"
        if not kind:
            causes.append(FieldCause(f"{path}.type", "Required value", ""))
        elif kind in types and kind in (*APPROVAL_TYPES, "Failed"):
            causes.append(FieldCause(f"{path}.type", "Duplicate value", "", kind))
        if condition.get("status") not in ("True", "False", "Unknown"):
            causes.append(FieldCause(f"{path}.status", "Unsupported value",
                                     'supported values: "False", "True", "Unknown"',
                                     condition.get("status", "")))
        elif kind in APPROVAL_TYPES and condition["status"] != "True":
            causes.append(FieldCause(f"{path}.status", "Unsupported value",
                                     'supported values: "True"', condition["status"]))
        types.append(kind)
    if "Approved" in types and "Denied" in types:
        index = types.index("Denied") if types.index("Denied") > types.index(
            "Approved") else types.index("Approved")
        causes.append(FieldCause(f"status.conditions[{index}].type", "Invalid value",
                                 "Approved and Denied conditions are mutually exclusive",
                                 types[index]))
    certificate = status.get("certificate")
    if certificate:
        if "Approved" not in types:
            causes.append(FieldCause("status.certificate", "Forbidden",
                                     "certificate may only be set if the Approved condition "
                                     "is true"))
        if "Failed" in types:
            causes.append(FieldCause("status.certificate", "Forbidden",
                                     "certificate may not be set if the Failed condition is "
                                     "true"))
    return causes


def _approval(status: Obj) -> list[Obj]:
    return [c for c in status.get("conditions") or [] if c.get("type") in APPROVAL_TYPES]


def _not_approval(status: Obj) -> list[Obj]:
    return [c for c in status.get("conditions") or [] if c.get("type") not in APPROVAL_TYPES]


def _set_conditions(obj: Obj, conditions: list[Obj]) -> None:
    status = obj.setdefault("status", {})
    if conditions:
        status["conditions"] = conditions
    else:
        status.pop("conditions", None)


def _stamp(conditions: list[Obj], old: list[Obj]) -> None:
    """populateConditionTimestamps: lastUpdateTime defaults to now, lastTransitionTime carries
    over while the condition's status does not change."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    previous = {c.get("type"): c for c in old}
    for condition in conditions:
        condition.setdefault("lastUpdateTime", now)
        before = previous.get(condition.get("type"))
        if before is not None and before.get("status") == condition.get("status"):
            condition.setdefault("lastTransitionTime", before.get("lastTransitionTime", now))
        condition.setdefault("lastTransitionTime", now)


class CertificateSigningRequestStrategy(Strategy):
    """Create clears status; an update changes neither spec nor status; /status writes the
    certificate and non-approval conditions; /approval writes only Approved/Denied."""

    def prepare_for_create(self, obj: Obj) -> None:
        obj["status"] = {}

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        _keep(new, old, "spec")
        _keep(new, old, "status")

    def prepare_for_status_update(self, new: Obj, old: Obj) -> None:
        _keep(new, old, "spec")
        status = new.get("status") or {}
        old_status = old.get("status") or {}
        conditions = _approval(old_status) + _not_approval(status)
        _stamp(conditions, old_status.get("conditions") or [])
        _set_conditions(new, conditions)

    def prepare_for_approval(self, new: Obj, old: Obj) -> None:
        _keep(new, old, "spec")
        approval = _approval(new.get("status") or {})
        old_status = old.get("status") or {}
        new["status"] = dict(old_status)
        conditions = approval + _not_approval(old_status)
        _stamp(conditions, old_status.get("conditions") or [])
        _set_conditions(new, conditions)

    def validate(self, obj: Obj) -> list[FieldCause]:
        return _spec_errors(obj.get("spec") or {}) + _status_errors(obj.get("status") or {})

    def validate_update(self, new: Obj, old: Obj) -> list[FieldCause]:
        causes = _status_errors(new.get("status") or {})
        new_types = [c.get("type") for c in (new.get("status") or {}).get("conditions") or []]
        for condition in _approval(old.get("status") or {}):
            if condition.get("type") not in new_types:
                causes.append(FieldCause("status.conditions", "Forbidden",
                                         f"updates may not remove a condition of type "
                                         f"\"{condition.get('type')}\""))
        old_certificate = (old.get("status") or {}).get("certificate")
        if old_certificate and (new.get("status") or {}).get("certificate") != old_certificate:
            causes.append(FieldCause("status.certificate", "Forbidden",
                                     "updates may not modify existing certificate content"))
        return causes


def kubelet_serving_errors(request: x509.CertificateSigningRequest,
                           usages: list[str]) -> str:
    """ValidateKubeletServingCSR: why the kubelet-serving signer refuses a request ("" if not)."""
    organizations = [a.value for a in request.subject.get_attributes_for_oid(
        NameOID.ORGANIZATION_NAME)]
    if organizations != ["system:nodes"]:
        return "subject organization is not system:nodes"
    names = [a.value for a in request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    if not names or not str(names[0]).startswith("system:node:"):
        return "subject common name does not begin with system:node:"
    try:
        sans = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        sans = x509.SubjectAlternativeName([])
    if sans.get_values_for_type(x509.RFC822Name):
        return "Email subjectAltNames are not allowed"
    if sans.get_values_for_type(x509.UniformResourceIdentifier):
        return "URI subjectAltNames are not allowed"
    if not sans.get_values_for_type(x509.DNSName) and not sans.get_values_for_type(
            x509.IPAddress):
        return "DNS or IP subjectAltName is required"
    required = {"digital signature", "server auth"}
    if not required <= set(usages) <= required | {"key encipherment"}:
        return (f"usages did not match [digital signature key encipherment server auth]: "
                f"{usages}")
    return ""


def sign(request: x509.CertificateSigningRequest, usages: list[str], expiration_seconds: int | None,
         ca_cert: x509.Certificate, ca_key: CertificateIssuerPrivateKeyTypes,
         max_duration: datetime.timedelta = DEFAULT_SIGNING_DURATION) -> bytes:
    """The PEM certificate the authority issues: the request's subject and SANs, its usages,
    min(expirationSeconds, the signing duration), not past the CA's own end."""
    now = datetime.datetime.now(datetime.UTC)
    ttl = max_duration
    if expiration_seconds is not None:
        ttl = min(ttl, datetime.timedelta(seconds=expiration_seconds))
    not_after = now + ttl if ttl < SHORT else now + ttl - BACKDATE
    not_after = min(not_after, ca_cert.not_valid_after_utc)
    key_usage = dict.fromkeys(("digital_signature", "content_commitment", "key_encipherment",
                               "data_encipherment", "key_agreement", "key_cert_sign",
                               "crl_sign", "encipher_only", "decipher_only"), False)
    key_usage["digital_signature"] = "digital signature" in usages or "signing" in usages
    key_usage["key_encipherment"] = "key encipherment" in usages
    extended = [oid for usage, oid in (("server auth", ExtendedKeyUsageOID.SERVER_AUTH),
                                       ("client auth", ExtendedKeyUsageOID.CLIENT_AUTH))
                if usage in usages]
    builder = (x509.CertificateBuilder().subject_name(request.subject)
               .issuer_name(ca_cert.subject).public_key(request.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - BACKDATE).not_valid_after(not_after)
               .add_extension(x509.KeyUsage(**key_usage), critical=True)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True))
    if extended:
        builder = builder.add_extension(x509.ExtendedKeyUsage(extended), critical=False)
    try:
        sans = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        builder = builder.add_extension(sans, critical=False)
    except x509.ExtensionNotFound:
        pass
    certificate = builder.sign(ca_key, hashes.SHA256())
    return certificate.public_bytes(serialization.Encoding.PEM)


def request_of(obj: Obj) -> x509.CertificateSigningRequest:
    return parse_request(_request_pem(obj.get("spec") or {}))
