"""certificates.k8s.io/v1 CertificateSigningRequests as kube-apiserver serves them (validation,
the approval subresource and its `approve`-on-signers check) and kube-controller-manager's
kubelet-serving signer. Also on real clusters."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.helpers import wait_for
from tests.kubesim.rest import call
from tests.kubesim.test_auth_tokens import client_with_token, request_token

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
SERVING = ["digital signature", "key encipherment", "server auth"]


def csr_pem(common_name: str, organization: str = "system:nodes",
            sans: tuple[x509.GeneralName, ...] = (x509.DNSName("node-a"),
                                                  x509.IPAddress(ipaddress.ip_address(
                                                      "10.1.2.3")))) -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization),
        x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM).decode()


def manifest(name: str, pem: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": name},
            "spec": {"request": base64.b64encode(pem.encode()).decode(),
                     "signerName": "kubernetes.io/kubelet-serving", "usages": SERVING, **spec}}


@pytest.fixture
def csr_name(home: Any) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    yield name
    call(home, "DELETE", f"{CSRS}/{name}")


def approve(cluster: Any, name: str, api_client: Any = None) -> tuple[int, Any]:
    """What `kubectl certificate approve` sends: the CSR with an Approved condition, PUT to
    /approval."""
    status, csr = call(cluster, "GET", f"{CSRS}/{name}")
    assert status == 200
    csr["status"]["conditions"] = [{"type": "Approved", "status": "True",
                                    "reason": "KubectlApprove",
                                    "message": "This CSR was approved by kubectl certificate "
                                               "approve."}]
    if api_client is None:
        return call(cluster, "PUT", f"{CSRS}/{name}/approval", csr)
    api = client.CertificatesV1Api(api_client)
    try:
        return 200, api.replace_certificate_signing_request_approval(name, csr)
    except ApiException as error:
        return int(error.status), error.body


def cluster_ca(home: Any) -> x509.Certificate:
    with open(home.api_client.configuration.ssl_ca_cert, "rb") as file:
        return x509.load_pem_x509_certificate(file.read())


def test_a_kubelet_serving_request_is_issued_from_the_cluster_ca_once_approved(
        home, csr_name) -> None:
    status, created = call(home, "POST", CSRS, manifest(
        csr_name, csr_pem("system:node:node-a"), expirationSeconds=3600))
    assert status == 201, created
    assert not (created.get("status") or {}).get("certificate")
    status, answer = approve(home, csr_name)
    assert status == 200, answer
    assert [c["type"] for c in answer["status"]["conditions"]] == ["Approved"]
    assert answer["status"]["conditions"][0]["lastUpdateTime"]

    def issued() -> str:
        return str(call(home, "GET", f"{CSRS}/{csr_name}")[1]["status"]["certificate"])

    certificate = x509.load_pem_x509_certificate(base64.b64decode(wait_for(issued)))
    ca = cluster_ca(home)
    assert certificate.issuer == ca.subject
    certificate.verify_directly_issued_by(ca)
    assert certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == (
        "system:node:node-a")
    sans = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["node-a"]
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.1.2.3")]
    left = certificate.not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    assert datetime.timedelta(minutes=50) < left <= datetime.timedelta(hours=1)


@pytest.mark.parametrize(("spec", "pem", "expected"), [
    ({"expirationSeconds": 599}, None,
     "spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 "
     "seconds (10 minutes)"),
    ({"signerName": ""}, None, "spec.signerName: Required value"),
    ({"usages": ["server auth", "flying"]}, None, 'spec.usages[1]: Unsupported value: "flying"'),
    ({}, "not a pem", "spec.request: Invalid value"),
])
def test_an_invalid_request_is_refused(home, csr_name, spec, pem, expected) -> None:
    body = manifest(csr_name, pem or csr_pem("system:node:node-a"), **spec)
    status, answer = call(home, "POST", CSRS, body)
    assert status == 422, answer
    assert answer["reason"] == "Invalid"
    assert expected in answer["message"]


def test_approved_and_denied_together_are_refused(home, csr_name) -> None:
    call(home, "POST", CSRS, manifest(csr_name, csr_pem("system:node:node-a")))
    _, csr = call(home, "GET", f"{CSRS}/{csr_name}")
    csr["status"]["conditions"] = [{"type": "Approved", "status": "True"},
                                   {"type": "Denied", "status": "True"}]
    status, answer = call(home, "PUT", f"{CSRS}/{csr_name}/approval", csr)
    assert status == 422, answer
    assert "Approved and Denied conditions are mutually exclusive" in answer["message"]


def test_a_request_the_kubelet_serving_signer_refuses_is_marked_failed(home, csr_name) -> None:
    call(home, "POST", CSRS, manifest(csr_name, csr_pem("system:node:node-a", "acme")))
    assert approve(home, csr_name)[0] == 200

    def failed() -> dict[str, Any]:
        conditions = call(home, "GET", f"{CSRS}/{csr_name}")[1]["status"]["conditions"]
        return next(c for c in conditions if c["type"] == "Failed")

    condition = wait_for(failed)
    assert condition["reason"] == "SignerValidationFailure"
    assert condition["message"] == "subject organization is not system:nodes"
    assert not call(home, "GET", f"{CSRS}/{csr_name}")[1]["status"].get("certificate")


@pytest.fixture
def approver(home: Any, namespace: str) -> Iterator[tuple[Any, str]]:
    """A service account allowed to update CSR approvals but not (yet) to approve for any
    signer, and the ClusterRole that grants it: (its client, role name)."""
    home.core.create_namespaced_service_account(namespace, {"metadata": {"name": "approver"}})
    rbac = client.RbacAuthorizationV1Api(home.api_client)
    role = f"{namespace}-csr-approver"
    rbac.create_cluster_role({"metadata": {"name": role}, "rules": [{
        "apiGroups": ["certificates.k8s.io"],
        "resources": ["certificatesigningrequests", "certificatesigningrequests/approval"],
        "verbs": ["get", "update"]}]})
    rbac.create_cluster_role_binding({
        "metadata": {"name": role}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": "approver", "namespace": namespace}]})
    token = request_token(home, namespace, "approver").status.token
    api_client = client_with_token(home, token)
    try:
        yield api_client, role
    finally:
        api_client.close()
        rbac.delete_cluster_role_binding(role)
        rbac.delete_cluster_role(role)


def test_approving_needs_approve_on_the_signer(home, csr_name, approver) -> None:
    api_client, role = approver
    call(home, "POST", CSRS, manifest(csr_name, csr_pem("system:node:node-a")))
    status, body = approve(home, csr_name, api_client)
    assert status == 403, body
    assert json.loads(body)["message"].endswith(
        'is forbidden: user not permitted to approve requests with signerName '
        '"kubernetes.io/kubelet-serving"')
    client.RbacAuthorizationV1Api(home.api_client).patch_cluster_role(role, {"rules": [
        {"apiGroups": ["certificates.k8s.io"],
         "resources": ["certificatesigningrequests", "certificatesigningrequests/approval"],
         "verbs": ["get", "update"]},
        {"apiGroups": ["certificates.k8s.io"], "resources": ["signers"],
         "resourceNames": ["kubernetes.io/kubelet-serving"], "verbs": ["approve"]}]})
    status, body = wait_for(lambda: (r := approve(home, csr_name, api_client))[0] == 200 and r)
    assert [c.type for c in body.status.conditions] == ["Approved"]
