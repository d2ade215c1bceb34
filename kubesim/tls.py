"""TLS for a simulated cluster: a self-signed CA (trustme) and a loopback server certificate."""

from __future__ import annotations

import ssl
from dataclasses import dataclass

import trustme


@dataclass(frozen=True)
class ServerTLS:
    ca_pem: bytes  # what kubeconfigs carry as certificate-authority-data
    context: ssl.SSLContext

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cadata=self.ca_pem.decode())
        return context


def make_server_tls(hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> ServerTLS:
    ca = trustme.CA()
    certificate = ca.issue_cert(*hosts)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    certificate.configure_cert(context)
    return ServerTLS(ca.cert_pem.bytes(), context)
