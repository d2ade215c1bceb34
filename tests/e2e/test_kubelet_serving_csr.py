"""End to end: with --kubelet-serving-cert-from-csr the agent requests its kubelet serving
certificate from the home kubelet-serving signer, an administrator approves it, and a home API
server that verifies kubelets (--kubelet-certificate-authority) then reaches the agent's kubelet
API; the certificate is renewed before it expires and swapped without a restart.

kubesim only: the API server's --kubelet-certificate-authority and kube-controller-manager's
--cluster-signing-duration are switched for the test (a real control plane reads them at start)."""

from __future__ import annotations

import base64
import socket
import ssl
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from kubernetes import client

from tests.conftest import ClusterHandle
from tests.e2e.test_kubelet_api import agent_address, echo_pod, kubelet_port
from tests.e2e.test_offloading import offloaded
from tests.helpers import wait_for
from tests.home_agent.conftest import RunningAgent

pytestmark = pytest.mark.kubesim_only(reason="turns on the home API server's verification of "
                                             "kubelet serving certificates and shortens their "
                                             "lifetime (sim.set_kubelet_certificate_authority, "
                                             "csr_signer.duration), which a running "
                                             "kube-apiserver cannot change")
LIFETIME = timedelta(seconds=20)  # renewed 14-18 s after issue


@pytest.fixture
def verifying_home(home: ClusterHandle) -> Iterator[ClusterHandle]:
    signer = home.sim.csr_signer
    duration = signer.duration
    home.run(lambda: home.sim.set_kubelet_certificate_authority(True))
    signer.duration = LIFETIME
    try:
        yield home
    finally:
        signer.duration = duration
        home.run(lambda: home.sim.set_kubelet_certificate_authority(False))


@pytest.fixture
def agent(verifying_home: ClusterHandle, peer: Any, tmp_path: Path) -> RunningAgent:
    home = verifying_home
    ca = home.core.read_namespaced_config_map("kube-root-ca.crt", "kube-system").data["ca.crt"]
    (tmp_path / "home-ca.crt").write_text(ca)
    running: RunningAgent = peer("--agent-ip", agent_address(home),
                                 "--kubelet-client-ca", str(tmp_path / "home-ca.crt"),
                                 "--kubelet-serving-cert-from-csr")
    return running


def requests_of(home: ClusterHandle, node_name: str) -> list[Any]:
    csrs = client.CertificatesV1Api(home.api_client).list_certificate_signing_request().items
    return sorted((c for c in csrs if c.metadata.name.startswith(f"{node_name}-serving-")),
                  key=lambda c: int(c.metadata.resource_version))


def approve(home: ClusterHandle, csr: Any) -> None:
    """As `kubectl certificate approve` does."""
    api = client.CertificatesV1Api(home.api_client)
    current = api.read_certificate_signing_request(csr.metadata.name)
    current.status.conditions = [client.V1CertificateSigningRequestCondition(
        type="Approved", status="True", reason="KubectlApprove",
        message="This CSR was approved by kubectl certificate approve.")]
    api.replace_certificate_signing_request_approval(csr.metadata.name, current)


def served_certificate(home: ClusterHandle, node_name: str) -> x509.Certificate:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    port = kubelet_port(home, node_name)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            context.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def issued(home: ClusterHandle, name: str) -> x509.Certificate:
    csr = client.CertificatesV1Api(home.api_client).read_certificate_signing_request(name)
    assert csr.status.certificate
    return x509.load_pem_x509_certificate(base64.b64decode(csr.status.certificate))


def test_an_approved_serving_certificate_is_served_verified_and_renewed(
        verifying_home: ClusterHandle, agent: RunningAgent, namespace: str) -> None:
    home = verifying_home
    offloaded(home, namespace)
    home.core.create_namespaced_pod(namespace, echo_pod())
    wait_for(lambda: home.core.read_namespaced_pod("web", namespace).status.phase == "Running",
             timeout=60, message="the pod runs remotely and says so at home")
    first = wait_for(lambda: requests_of(home, agent.node_name), timeout=30,
                     message="the agent requests a serving certificate")[0]
    assert first.spec.signer_name == "kubernetes.io/kubelet-serving"
    assert first.spec.usages == ["digital signature", "key encipherment", "server auth"]
    # not approved: the self-signed certificate is still served, which this API server refuses
    with pytest.raises(client.ApiException) as refused:
        home.core.read_namespaced_pod_log("web", namespace, container="web")
    assert "x509" in refused.value.body
    # unless the caller asks it not to verify (insecureSkipTLSVerifyBackend, pods/log only)
    assert home.core.read_namespaced_pod_log("web", namespace, container="web",
                                             insecure_skip_tls_verify_backend=True) == (
        "one\ntwo\nthree\n")
    assert f"kubectl certificate approve {first.metadata.name}" in agent.process.output()
    try:
        approve(home, first)
        wait_for(lambda: home.core.read_namespaced_pod_log("web", namespace, container="web")
                 == "one\ntwo\nthree\n", timeout=30,
                 message="logs through an API server that verifies the kubelet")
        certificate = served_certificate(home, agent.node_name)
        assert certificate == issued(home, first.metadata.name)
        assert certificate.subject.rfc4514_string() == (
            f"CN=system:node:{agent.node_name},O=system:nodes")

        renewal = wait_for(lambda: requests_of(home, agent.node_name)[1:], timeout=60,
                           message="the agent renews before expiry")[0]
        approve(home, renewal)
        renewed = wait_for(lambda: (c := served_certificate(home, agent.node_name)) != (
            certificate) and c, timeout=30, message="the renewed certificate is served")
        assert renewed == issued(home, renewal.metadata.name)
        assert renewed.not_valid_after_utc > certificate.not_valid_after_utc
        assert home.core.read_namespaced_pod_log("web", namespace, container="web") == (
            "one\ntwo\nthree\n")
    finally:
        api = client.CertificatesV1Api(home.api_client)
        for csr in requests_of(home, agent.node_name):
            api.delete_certificate_signing_request(csr.metadata.name)
