"""Browse the LAN for providers (mDNS, `_annex._tcp.local.`): each instance that appears or
changes is resolved (SRV, TXT) and put in the sightings; one that leaves (a goodbye packet, or
its records' TTL running out) is dropped, so the controller notices an announcement going away.
"""

from __future__ import annotations

import asyncio
import logging

from zeroconf import IPVersion, ServiceStateChange, Zeroconf
from zeroconf.asyncio import AsyncServiceBrowser, AsyncServiceInfo, AsyncZeroconf

from home_controller.sightings import Sightings
from shared import dnssd
from shared.api.foreign_cluster import DiscoverySource

log = logging.getLogger(__name__)

RESOLVE_TIMEOUT_MS = 3000


class MdnsBrowser:
    def __init__(self, sightings: Sightings, interfaces: tuple[str, ...] = (),
                 settle_seconds: float = 3.0) -> None:
        self.sightings = sightings
        self.interfaces = interfaces
        self.settle_seconds = settle_seconds
        self._resolving: set[asyncio.Task[None]] = set()
        sightings.expect(DiscoverySource.MDNS)

    def _changed(self, zeroconf: Zeroconf, service_type: str, name: str,
                 state_change: ServiceStateChange) -> None:
        if state_change is ServiceStateChange.Removed:
            log.info("mDNS: %s withdrawn", name)
            self.sightings.drop(DiscoverySource.MDNS, name)
            return
        task = asyncio.get_running_loop().create_task(self._resolve(zeroconf, service_type, name))
        self._resolving.add(task)
        task.add_done_callback(self._resolving.discard)

    async def _resolve(self, zeroconf: Zeroconf, service_type: str, name: str) -> None:
        info = AsyncServiceInfo(service_type, name)
        if not await info.async_request(zeroconf, RESOLVE_TIMEOUT_MS):
            log.warning("mDNS: %s announced but not resolved", name)
            return
        announcement = dnssd.announcement_from(dnssd.decoded(info.properties), info.server,
                                               info.port)
        if announcement is None:
            log.warning("mDNS: %s names no cluster id and API server: ignored", name)
            return
        log.info("mDNS: %s announces %s at %s", name, announcement.cluster_id,
                 announcement.api_server_url)
        self.sightings.put(DiscoverySource.MDNS, name, announcement)

    async def run(self) -> None:
        """Browse until cancelled. The first look is taken as complete after `settle_seconds`
        (an mDNS browse never ends: announcers answer the first queries within a second or two,
        RFC 6762 section 6)."""
        try:
            zeroconf = (AsyncZeroconf(interfaces=list(self.interfaces),
                                      ip_version=IPVersion.V4Only)
                        if self.interfaces else AsyncZeroconf(ip_version=IPVersion.V4Only))
        except OSError as error:
            # The rest of the controller works on: consent, acceptance, DNS discovery.
            log.error("mDNS: cannot browse (%s): mDNS discovery is off", error)
            self.sightings.fail(DiscoverySource.MDNS)
            return
        browser = AsyncServiceBrowser(zeroconf.zeroconf, dnssd.MDNS_SERVICE_TYPE,
                                      handlers=[self._changed])
        try:
            await asyncio.sleep(self.settle_seconds)
            self.sightings.settle(DiscoverySource.MDNS)
            await asyncio.Event().wait()
        finally:
            await browser.async_cancel()
            for task in list(self._resolving):
                task.cancel()
            await asyncio.gather(*self._resolving, return_exceptions=True)
            await zeroconf.async_close()
