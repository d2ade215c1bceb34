"""The webhook's TLS: the given certificate files, or a self-signed development CA (trustme)
whose certificate is written to `ca.crt` for the webhook configuration's caBundle."""

from __future__ import annotations

import ssl
from pathlib import Path

import trustme


def server_context(cert: str | None, key: str | None, hosts: tuple[str, ...],
                   cert_dir: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    if cert and key:
        context.load_cert_chain(cert, key)
        return context
    authority = trustme.CA()
    authority.issue_cert(*hosts).configure_cert(context)
    if cert_dir:
        directory = Path(cert_dir)
        directory.mkdir(parents=True, exist_ok=True)
        authority.cert_pem.write_to_path(str(directory / "ca.crt"))
    return context
