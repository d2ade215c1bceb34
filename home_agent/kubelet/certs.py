"""The kubelet API's serving certificate when none is mounted: self-signed at start for the node
name and the agent's address, as a kubelet without --tls-cert-file makes one for its host.

kube-apiserver verifies a kubelet's serving certificate only when started with
--kubelet-certificate-authority; then a certificate from the cluster's kubelet-serving signer is
needed, which the chart can mount (`--kubelet-cert`/`--kubelet-key`) or the agent can request
(`--kubelet-serving-cert-from-csr`, home_agent/kubelet/csr.py)."""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import tempfile

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

VALIDITY = datetime.timedelta(days=365)


def san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def self_signed(node_name: str, addresses: list[str]) -> tuple[bytes, bytes]:
    """(certificate PEM, private key PEM) for `node_name` and `addresses`."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{node_name}@annex")])
    now = datetime.datetime.now(datetime.UTC)
    hosts = list(dict.fromkeys([node_name, *addresses]))
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + VALIDITY)
        .add_extension(x509.SubjectAlternativeName([san(h) for h in hosts]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                       critical=False)
        .sign(key, hashes.SHA256()))
    return (certificate.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


def load_pair(context: ssl.SSLContext, certificate: bytes, key: bytes) -> None:
    """Install a PEM pair in `context`. `load_cert_chain` reads only files, so the pair passes
    through a private temporary directory (the agent's root filesystem is read-only; /tmp is
    not) that is removed at once: the private key is kept in memory only, and restarts leave
    nothing behind."""
    with tempfile.TemporaryDirectory(prefix="annex-kubelet-") as directory:
        paths = (os.path.join(directory, "tls.crt"), os.path.join(directory, "tls.key"))
        for path, data in zip(paths, (certificate, key), strict=True):
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as file:
                file.write(data)
        context.load_cert_chain(*paths)
