"""Look providers up in ordinary DNS (for a WAN): under each configured domain, the
PTR records of `_annex._tcp.<domain>` name the service instances, and each instance's SRV and
TXT records say which cluster it is and where its API server is (shared/dnssd.py has the
records a provider's admin publishes). Unicast lookups with dnspython, every `interval`
seconds; a domain that cannot be resolved keeps what it showed last (a DNS hiccup withdraws
nothing), one that answers NXDOMAIN or no PTR shows nothing.
"""

from __future__ import annotations

import asyncio
import logging

import dns.asyncresolver
import dns.exception
import dns.resolver
from dns.rdtypes.ANY.PTR import PTR
from dns.rdtypes.ANY.TXT import TXT
from dns.rdtypes.IN.SRV import SRV

from home_controller.sightings import Sightings
from shared import dnssd
from shared.api.foreign_cluster import DiscoverySource

log = logging.getLogger(__name__)

LOOKUP_SECONDS = 5.0


def resolver_for(nameservers: tuple[str, ...]) -> dns.asyncresolver.Resolver:
    """The system's resolver, or one asking `nameservers` ("host" or "host:port") only."""
    if not nameservers:
        return dns.asyncresolver.Resolver()
    resolver = dns.asyncresolver.Resolver(configure=False)
    addresses, ports = [], set()
    for server in nameservers:
        host, _, port = server.rpartition(":") if server.count(":") == 1 else (server, "", "")
        addresses.append(host)
        ports.add(int(port) if port else 53)
    if len(ports) > 1:
        raise ValueError(f"DNS servers on different ports: {nameservers}")
    resolver.nameservers, resolver.port = addresses, ports.pop()
    return resolver


class NoRecords(Exception):
    """The domain answers, and publishes no announcement (NXDOMAIN, no PTR)."""


async def _answers(resolver: dns.asyncresolver.Resolver, name: str, rdtype: str) -> list[object]:
    try:
        answer = await resolver.resolve(name, rdtype, lifetime=LOOKUP_SECONDS, search=False)
    except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
        raise NoRecords(name) from None
    return list(answer)


async def lookup(resolver: dns.asyncresolver.Resolver, domain: str
                 ) -> dict[str, dnssd.Announcement]:
    """The announcements published under `domain`, by instance name; NoRecords when there are
    none; dns.exception.DNSException when the domain cannot be asked."""
    found: dict[str, dnssd.Announcement] = {}
    for pointer in await _answers(resolver, dnssd.service_type(domain), "PTR"):
        assert isinstance(pointer, PTR)
        instance = pointer.target.to_text()
        try:
            services = await _answers(resolver, instance, "SRV")
            texts = await _answers(resolver, instance, "TXT")
        except NoRecords:
            log.warning("DNS: %s has no SRV or TXT record: ignored", instance)
            continue
        properties: dict[str, str] = {}
        for text in texts:
            assert isinstance(text, TXT)
            properties.update(dnssd.properties_from_strings(list(text.strings)))
        service = min((s for s in services if isinstance(s, SRV)),
                      key=lambda s: (s.priority, -s.weight))
        announcement = dnssd.announcement_from(properties, service.target.to_text(),
                                               service.port)
        if announcement is None:
            log.warning("DNS: %s names no cluster id: ignored", instance)
            continue
        found[instance] = announcement
    return found


class DnsBrowser:
    def __init__(self, sightings: Sightings, domains: tuple[str, ...],
                 nameservers: tuple[str, ...] = (), interval: float = 60.0) -> None:
        self.sightings = sightings
        self.domains = domains
        self.resolver = resolver_for(nameservers)
        self.interval = interval
        self._last: dict[str, dict[str, dnssd.Announcement]] = {}
        sightings.expect(DiscoverySource.DNS)

    async def look(self) -> None:
        """One round over every domain, then the sightings are what the round showed."""
        for domain in self.domains:
            try:
                self._last[domain] = await lookup(self.resolver, domain)
            except NoRecords:
                self._last[domain] = {}
            except dns.exception.DNSException as error:
                log.warning("DNS: cannot look up %s (kept what it showed before): %s",
                            dnssd.service_type(domain), error)
        self.sightings.replace(DiscoverySource.DNS, {
            instance: announcement for found in self._last.values()
            for instance, announcement in found.items()})
        self.sightings.settle(DiscoverySource.DNS)

    async def run(self) -> None:
        while True:
            await self.look()
            await asyncio.sleep(self.interval)
