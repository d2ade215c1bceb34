"""The kubelet API's serving pair is installed in memory: the self-signed one made at start and
each one issued through a CertificateSigningRequest reach the TLS context through files that are
gone once it has read them, so a restart leaves no private key behind in /tmp."""

from __future__ import annotations

import ssl
import tempfile
from pathlib import Path

import pytest
import trustme
from cryptography import x509

from home_agent.config import AgentConfig
from home_agent.kubelet.csr import ServingCertificates
from home_agent.kubelet.server import serving_context


@pytest.fixture
def temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def served_certificate(context: ssl.SSLContext) -> x509.Certificate:
    """The certificate a client sees when it shakes hands with `context` (in memory)."""
    client_context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_context.check_hostname = False
    client_context.verify_mode = ssl.CERT_NONE
    client = client_context.wrap_bio(incoming := ssl.MemoryBIO(), outgoing := ssl.MemoryBIO())
    server_in, server_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    server = context.wrap_bio(server_in, server_out, server_side=True)
    for _ in range(10):
        for side in (client, server):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
        server_in.write(outgoing.read())
        incoming.write(server_out.read())
    der = client.getpeercert(binary_form=True)
    assert der is not None, "no handshake"
    return x509.load_der_x509_certificate(der)


def test_the_self_signed_pair_names_the_node_and_leaves_no_file(temporary: Path) -> None:
    config = AgentConfig(home_cluster_id="home", remote_cluster_id="r", remote_kubeconfig="-",
                         agent_ip="10.1.2.3")
    certificate = served_certificate(serving_context(config))
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["liqo-r"]
    assert [str(a) for a in names.get_values_for_type(x509.IPAddress)] == ["10.1.2.3"]
    assert list(temporary.iterdir()) == []


def test_an_issued_pair_replaces_the_served_one_and_leaves_no_file(temporary: Path) -> None:
    config = AgentConfig(home_cluster_id="home", remote_cluster_id="r", remote_kubeconfig="-")
    context = serving_context(config)
    issued = trustme.CA().issue_cert("liqo-r")
    serving = ServingCertificates(None, context, "liqo-r", ["127.0.0.1"])  # type: ignore[arg-type]
    installed = serving._install(issued.cert_chain_pems[0].bytes(),
                                 issued.private_key_pem.bytes())
    assert served_certificate(context) == installed
    assert list(temporary.iterdir()) == []
