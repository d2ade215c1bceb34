"""The webhook certificate: files given, or self-signed; rotated files are picked up live."""

from __future__ import annotations

import asyncio
import os
import ssl
from pathlib import Path

import trustme

from remote_enforcer.certs import reload_on_change, server_context


def issue(directory: Path) -> trustme.CA:
    authority = trustme.CA()
    issued = authority.issue_cert("127.0.0.1")
    issued.cert_chain_pems[0].write_to_path(str(directory / "tls.crt"))
    issued.private_key_pem.write_to_path(str(directory / "tls.key"))
    return authority


async def handshake(port: int, authority: trustme.CA) -> bool:
    """True when a client trusting `authority` completes a TLS handshake with the server."""
    client = ssl.create_default_context()
    authority.configure_trust(client)
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
    except ssl.SSLError:
        return False
    writer.close()
    return True


def test_a_rotated_certificate_is_served_without_a_restart(tmp_path: Path) -> None:
    first = issue(tmp_path)
    cert, key = str(tmp_path / "tls.crt"), str(tmp_path / "tls.key")
    context = server_context(cert, key, (), None)

    async def scenario() -> tuple[bool, bool]:
        server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0, ssl=context)
        port = server.sockets[0].getsockname()[1]
        reloading = asyncio.create_task(reload_on_change(context, cert, key, interval=0.01))
        before = await handshake(port, first)
        second = issue(tmp_path)
        stamp = os.stat(cert).st_mtime + 5  # a distinct mtime even on coarse clocks
        os.utime(cert, (stamp, stamp))
        deadline = asyncio.get_running_loop().time() + 10
        while not await handshake(port, second):
            assert asyncio.get_running_loop().time() < deadline, "never reloaded"
            await asyncio.sleep(0.01)
        old_refused = not await handshake(port, first)
        reloading.cancel()
        server.close()
        return before, old_refused
    # served the first, then the second, and the first no longer
    assert asyncio.run(scenario()) == (True, True)


def test_without_files_a_self_signed_ca_is_written_for_the_ca_bundle(tmp_path: Path) -> None:
    server_context(None, None, ("localhost",), str(tmp_path / "certs"))
    assert (tmp_path / "certs" / "ca.crt").read_text().startswith("-----BEGIN CERTIFICATE-----")
