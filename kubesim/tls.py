"""TLS for a simulated cluster: a self-signed CA (trustme) and a loopback server certificate."""

from __future__ import annotations

import ssl
from dataclasses import dataclass

import trustme


@dataclass(frozen=True)
class ServerTLS:
    ca_pem: bytes  # what kubeconfigs carry as certificate-authority-data
    context: ssl.SSLContext
    ca: trustme.CA | None = None  # issues the kubelet certificates

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cadata=self.ca_pem.decode())
        return context


def make_server_tls(hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> ServerTLS:
    ca = trustme.CA()
    certificate = ca.issue_cert(*hosts)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    certificate.configure_cert(context)
    return ServerTLS(ca.cert_pem.bytes(), context, ca)


@dataclass(frozen=True)
class KubeletTLS:
    """The kubelet side of a simulated cluster's TLS, issued by the cluster CA as kubeadm
    issues it: the API server's kubelet client certificate (CN kube-apiserver-kubelet-client)
    and each kubelet's serving certificate. A kubelet trusts client certificates of that CA
    (its --client-ca-file is the cluster CA)."""

    ca_pem: bytes
    client_context: ssl.SSLContext  # what the API server presents when it dials a kubelet
    _ca: trustme.CA

    def serving_context(self, *hosts: str) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._ca.issue_cert(*hosts).configure_cert(context)
        context.verify_mode = ssl.CERT_OPTIONAL
        context.load_verify_locations(cadata=self.ca_pem.decode())
        return context


def make_kubelet_tls(ca: trustme.CA, verify_serving: bool = False) -> KubeletTLS:
    """`verify_serving`: kube-apiserver's --kubelet-certificate-authority (the cluster CA):
    a kubelet's serving certificate must then chain to it and name the address dialed."""
    client = ca.issue_cert("kube-apiserver-kubelet-client",
                           common_name="kube-apiserver-kubelet-client",
                           organization_name="system:masters")
    if verify_serving:
        context = ssl.create_default_context(cadata=ca.cert_pem.bytes().decode())
    else:
        context = ssl.create_default_context()
        # without --kubelet-certificate-authority kube-apiserver does not verify kubelet
        # serving certificates
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    client.configure_cert(context)
    return KubeletTLS(ca.cert_pem.bytes(), context, ca)
