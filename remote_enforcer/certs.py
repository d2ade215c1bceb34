"""The webhook's TLS: the given certificate files, or a self-signed development CA (trustme)
whose certificate is written to `ca.crt` for the webhook configuration's caBundle."""

from __future__ import annotations

import asyncio
import logging
import ssl
from pathlib import Path

import trustme

log = logging.getLogger(__name__)


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


async def reload_on_change(context: ssl.SSLContext, cert: str, key: str,
                           interval: float = 30.0) -> None:
    """Load the certificate again when its files change (cert-manager and Secret volume
    updates rotate it in place); new connections get the new one, no restart needed."""
    def stamp() -> tuple[float, float]:
        return Path(cert).stat().st_mtime, Path(key).stat().st_mtime

    seen = stamp()
    while True:
        await asyncio.sleep(interval)
        try:
            current = stamp()
            if current != seen:
                context.load_cert_chain(cert, key)
                seen = current
                log.info("webhook certificate reloaded from %s", cert)
        except (OSError, ssl.SSLError) as error:  # mid-rotation: try again next time
            log.warning("cannot reload the webhook certificate: %s", error)
