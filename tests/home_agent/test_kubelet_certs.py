"""The kubelet API's serving pair is installed in memory: the self-signed one made at start and
each one issued through a CertificateSigningRequest reach the TLS context through files that are
gone once it has read them, so a restart leaves no private key behind in /tmp."""

from __future__ import annotations

import asyncio
import base64
import datetime
import ssl
import tempfile
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

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
    certificate = served_certificate(serving_context(config, "liqo-r"))
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["liqo-r"]
    assert [str(a) for a in names.get_values_for_type(x509.IPAddress)] == ["10.1.2.3"]
    assert list(temporary.iterdir()) == []


class _Signer:
    """The home API server's certificates API with a signer that issues at once: a
    CertificateSigningRequest created is read back issued, signed by a CA of its own."""

    def __init__(self) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.issued: list[x509.Certificate] = []
        self.request = b""

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.request = base64.b64decode(body["spec"]["request"])
        return {"metadata": {"name": "liqo-r-serving-1"}}

    async def get(self, path: str) -> dict[str, Any]:
        request = x509.load_pem_x509_csr(self.request)
        now = datetime.datetime.now(datetime.UTC)
        issuer = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubelet-serving signer")])
        certificate = (x509.CertificateBuilder().subject_name(request.subject)
                       .issuer_name(issuer).public_key(request.public_key())
                       .serial_number(x509.random_serial_number())
                       .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
                       .sign(self.key, hashes.SHA256()))
        self.issued.append(certificate)
        pem = certificate.public_bytes(serialization.Encoding.PEM)
        return {"status": {"certificate": base64.b64encode(pem).decode()}}


def test_an_issued_pair_replaces_the_served_one_and_leaves_no_file(temporary: Path) -> None:
    config = AgentConfig(home_cluster_id="home", remote_cluster_id="r", remote_kubeconfig="-")
    context = serving_context(config, "liqo-r")
    signer = _Signer()
    serving = ServingCertificates(signer, context, "liqo-r",  # type: ignore[arg-type]
                                  ["127.0.0.1"])

    async def until_installed() -> None:
        renewing = asyncio.create_task(serving.run())
        try:
            async with asyncio.timeout(10):
                while serving.issued < 1:
                    await asyncio.sleep(0.01)
        except TimeoutError:
            raise AssertionError("no serving certificate installed after 10 s") from None
        finally:
            renewing.cancel()

    asyncio.run(until_installed())
    assert served_certificate(context) == signer.issued[-1]
    assert list(temporary.iterdir()) == []
