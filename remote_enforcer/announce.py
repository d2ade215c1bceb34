"""The provider announces itself on the LAN with mDNS: one DNS-SD service instance
named after its cluster id, of type `_annex._tcp.local.`, whose TXT record carries the cluster
id and the API server consumers reach (shared/dnssd.py). Off unless `--announce-mdns`.

An announcement grants nothing: it tells a home cluster where to ask, and the provider's admin
still consents explicitly (annexctl peer, a peering token). On exit the instance is withdrawn
with mDNS goodbye packets, so browsers notice at once instead of after the records' TTL.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

from zeroconf import IPVersion, ServiceInfo
from zeroconf.asyncio import AsyncZeroconf

from remote_enforcer.settings import Settings
from shared import dnssd

log = logging.getLogger(__name__)


def service_info(cluster_id: str, api_server_url: str) -> ServiceInfo:
    """The service instance announcing `cluster_id`: SRV on the API server's port, A records
    for its address when the URL names one (otherwise the interfaces' own, added by zeroconf's
    responder for the host name), TXT with the id and URL."""
    parts = urlsplit(api_server_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    addresses: list[bytes] = []
    try:
        addresses.append(ipaddress.ip_address(parts.hostname or "").packed)
    except ValueError:
        pass  # a host name: consumers read the URL from the TXT record
    announcement = dnssd.Announcement(cluster_id, api_server_url)
    return ServiceInfo(
        dnssd.MDNS_SERVICE_TYPE, dnssd.instance_name(cluster_id, "local"),
        port=port, addresses=addresses or None, server=f"{cluster_id}.annex.local.",
        properties=dnssd.txt_properties(announcement))


@asynccontextmanager
async def announced(settings: Settings) -> AsyncIterator[None]:
    """Announce the cluster while the block runs (nothing when announcing is off)."""
    if not settings.announce_mdns:
        yield
        return
    if not settings.announce_api_server:
        raise ValueError("--announce-mdns needs --announce-api-server")
    interfaces = list(settings.mdns_interfaces) or None
    info = service_info(settings.cluster_id, settings.announce_api_server)
    zeroconf: AsyncZeroconf | None = None
    try:
        zeroconf = (AsyncZeroconf(interfaces=interfaces, ip_version=IPVersion.V4Only)
                    if interfaces else AsyncZeroconf(ip_version=IPVersion.V4Only))
        # The first await probes the name; the awaitable it returns ends once the
        # announcements are sent, and browsers see the instance from the first of them.
        announcing = await zeroconf.async_register_service(info)
    except BaseException as error:
        if zeroconf is not None:
            await zeroconf.async_close()
        if not isinstance(error, Exception):
            raise  # stopped while probing: nothing announced yet
        # No such interface, no multicast, the name held by another responder: the enforcer
        # serves its consumers all the same (an announcement is a convenience).
        log.error("cannot announce %s on mDNS (%s: %s): not announced", info.name,
                  type(error).__name__, error)
        yield
        return
    try:
        # Stopped from here on, even before the last announcement, browsers have seen the
        # instance: the goodbye is owed.
        await announcing
        log.info("announcing %s on mDNS as %s (API %s)", settings.cluster_id, info.name,
                 settings.announce_api_server)
        yield
    finally:
        try:
            await (await zeroconf.async_unregister_service(info))
        finally:
            await zeroconf.async_close()
