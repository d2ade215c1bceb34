"""The serving certificate's request and renewal deadline (home_agent/kubelet/csr.py)."""

from __future__ import annotations

import datetime

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from home_agent.kubelet.csr import outcome, rotation_deadline, serving_request


def certificate(not_before: datetime.datetime, not_after: datetime.datetime) -> x509.Certificate:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "x")])
    return (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(not_before).not_valid_after(not_after).sign(key, hashes.SHA256()))


def test_the_request_names_the_node_as_the_kubelet_serving_signer_wants() -> None:
    pem, _ = serving_request("liqo-a", ["10.0.0.7"])
    request = x509.load_pem_x509_csr(pem)
    assert request.subject.rfc4514_string() == "CN=system:node:liqo-a,O=system:nodes"
    sans = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["liqo-a"]
    assert [str(a) for a in sans.get_values_for_type(x509.IPAddress)] == ["10.0.0.7"]


def test_renewal_falls_70_to_90_percent_into_the_life_counted_from_receipt() -> None:
    received = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
    # backdated 5 minutes, as kube-controller-manager signs: a 10-minute life from receipt
    backdated = certificate(received - datetime.timedelta(minutes=5),
                            received + datetime.timedelta(minutes=10))
    assert rotation_deadline(backdated, received, lambda low, high: low) == (
        received + datetime.timedelta(minutes=7))
    assert rotation_deadline(backdated, received, lambda low, high: high) == (
        received + datetime.timedelta(minutes=9))


def test_a_denied_or_failed_request_is_refused_with_its_reason() -> None:
    assert outcome({"status": {}}) == ("pending", "")
    assert outcome({"status": {"conditions": [{"type": "Approved", "status": "True"}],
                               "certificate": "Q0VSVA=="}}) == ("issued", "Q0VSVA==")
    assert outcome({"status": {"conditions": [
        {"type": "Denied", "status": "True", "reason": "NotOurs", "message": "no"}]}}) == (
        "refused", "Denied: NotOurs no")
