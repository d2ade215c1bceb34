"""The certificates of one control plane, laid out as kubeadm lays out /etc/kubernetes/pki: a
cluster CA signing the API server's serving certificate, its kubelet client certificate and
every client identity; a front-proxy CA for the aggregation layer; the service-account key
pair; kubeconfigs of client certificates (admin in system:masters, the controller manager, the
scheduler, the stand-in workers); and the stand-in kubelets' serving certificate."""

from __future__ import annotations

import base64
import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=1)  # a test session's control plane lives minutes


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    return x509.Name([*(x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


@dataclass(frozen=True)
class Issued:
    """A certificate and its key, as PEM files."""

    cert: Path
    key: Path


class Authority:
    """A self-signed CA (kubeadm's ca, front-proxy-ca) that issues leaf certificates."""

    def __init__(self, directory: Path, name: str, common_name: str) -> None:
        self.directory = directory
        self._key = _key()
        now = datetime.datetime.now(datetime.UTC)
        subject = _name(common_name)
        self._cert = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(True, False, True, False, False, True, True, False,
                                         False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()),
                           critical=False)
            .sign(self._key, hashes.SHA256()))
        self.pem = self._cert.public_bytes(serialization.Encoding.PEM)
        self.files = self._write(name, self.pem, _key_pem(self._key))

    def _write(self, name: str, cert: bytes, key: bytes) -> Issued:
        issued = Issued(self.directory / f"{name}.crt", self.directory / f"{name}.key")
        issued.cert.write_bytes(cert)
        issued.key.write_bytes(key)
        issued.key.chmod(0o600)
        return issued

    def issue(self, name: str, common_name: str, organizations: tuple[str, ...] = (),
              hosts: tuple[str, ...] = ()) -> Issued:
        """A leaf certificate: a server certificate for `hosts` when given (IP addresses or
        DNS names), else a client certificate of user `common_name` in groups
        `organizations`."""
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if hosts else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder().subject_name(_name(common_name, organizations))
            .issuer_name(self._cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(True, False, True, False, False, False, False, False,
                                         False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                self._key.public_key()), critical=False))
        if hosts:
            builder = builder.add_extension(x509.SubjectAlternativeName([_general_name(h)
                                                                         for h in hosts]),
                                            critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return self._write(name, cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


# The API server's names, as kubeadm's apiserver certificate carries them.
API_SERVER_NAMES = ("kubernetes", "kubernetes.default", "kubernetes.default.svc",
                    "kubernetes.default.svc.cluster.local", "localhost")


@dataclass(frozen=True)
class Pki:
    directory: Path
    ca: Issued
    ca_pem: bytes
    apiserver: Issued
    apiserver_kubelet_client: Issued
    front_proxy_ca: Issued
    front_proxy_client: Issued
    service_account_key: Path
    service_account_public_key: Path
    admin: Issued
    controller_manager: Issued
    scheduler: Issued
    workers: Issued
    kubelet_serving: Issued


def write_pki(directory: Path, address: str, service_ip: str) -> Pki:
    """Everything a control plane serving at `address` (its Service IP `service_ip`) needs."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = Authority(directory, "ca", "kubernetes")
    front_proxy = Authority(directory, "front-proxy-ca", "front-proxy-ca")
    account_key = _key()
    (directory / "sa.key").write_bytes(_key_pem(account_key))
    (directory / "sa.pub").write_bytes(account_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return Pki(
        directory=directory, ca=ca.files, ca_pem=ca.pem,
        apiserver=ca.issue("apiserver", "kube-apiserver",
                           hosts=(address, service_ip, *API_SERVER_NAMES)),
        # kubeadm's apiserver-kubelet-client: what the API server presents to kubelets
        apiserver_kubelet_client=ca.issue("apiserver-kubelet-client",
                                          "kube-apiserver-kubelet-client", ("system:masters",)),
        front_proxy_ca=front_proxy.files,
        front_proxy_client=front_proxy.issue("front-proxy-client", "front-proxy-client"),
        service_account_key=directory / "sa.key",
        service_account_public_key=directory / "sa.pub",
        admin=ca.issue("admin", "kubernetes-admin", ("system:masters",)),
        controller_manager=ca.issue("controller-manager", "system:kube-controller-manager"),
        scheduler=ca.issue("scheduler", "system:kube-scheduler"),
        # one identity for every stand-in worker (a real kubelet is system:node:<name>, which
        # the Node authorizer confines to its own node: these serve several)
        workers=ca.issue("workers", "envtest-workers", ("system:masters",)),
        # the stand-in kubelets' serving certificate (they all listen on `address`)
        kubelet_serving=ca.issue("kubelet", "envtest-kubelet", hosts=(address, "localhost")),
    )


def kubeconfig(name: str, server: str, ca_pem: bytes, user: Issued) -> dict[str, object]:
    """A kubeconfig of one client certificate, its context named after the cluster."""
    def data(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    return {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": name, "cluster": {
            "server": server, "certificate-authority-data": base64.b64encode(ca_pem).decode()}}],
        "users": [{"name": f"{name}-{user.cert.stem}", "user": {
            "client-certificate-data": data(user.cert), "client-key-data": data(user.key)}}],
        "contexts": [{"name": name, "context": {"cluster": name,
                                                "user": f"{name}-{user.cert.stem}",
                                                "namespace": "default"}}],
        "current-context": name,
    }


def write_kubeconfig(path: Path, name: str, server: str, ca_pem: bytes, user: Issued) -> Path:
    path.write_text(yaml.safe_dump(kubeconfig(name, server, ca_pem, user)))
    path.chmod(0o600)
    return path
