"""Discovery on the machine's own network: a real mDNS announcement (the enforcer's announcer)
browsed by the home controller on the loopback interface, and unicast DNS-SD lookups against a
DNS server the test runs. No mock: zeroconf and dnspython speak the wire protocols."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from home_controller.dns import DnsBrowser
from home_controller.mdns import MdnsBrowser
from home_controller.sightings import Sightings
from kubesim.dns import dns_server, publish, withdraw
from remote_enforcer.announce import announced
from remote_enforcer.settings import Settings
from shared.api.foreign_cluster import DiscoverySource
from shared.dnssd import Announcement

LOOPBACK = ("127.0.0.1",)


async def eventually(predicate: Callable[[], Any], timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := predicate()):
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)
    return result


def recorder() -> tuple[Sightings, list[str]]:
    changed: list[str] = []
    return Sightings(changed.append), changed


async def test_an_mdns_announcement_is_browsed_and_its_goodbye_noticed() -> None:
    cluster_id = f"lan-{uuid.uuid4().hex[:8]}"
    sightings, changed = recorder()
    browser = MdnsBrowser(sightings, LOOPBACK, settle_seconds=0.5)
    browsing = asyncio.create_task(browser.run())
    try:
        settings = Settings(cluster_id=cluster_id, announce_mdns=True,
                            announce_api_server="https://127.0.0.1:6443",
                            mdns_interfaces=LOOPBACK)
        async with announced(settings):
            (seen,) = await eventually(lambda: sightings.of(cluster_id))
            assert seen.source is DiscoverySource.MDNS
            assert seen.instance == f"{cluster_id}._annex._tcp.local."
            assert seen.announcement == Announcement(cluster_id, "https://127.0.0.1:6443")
            assert cluster_id in changed
            await eventually(sightings.settled)
        # Leaving the block sent the goodbye: the browser drops it well before the TTL.
        await eventually(lambda: not sightings.of(cluster_id), timeout=10.0)
    finally:
        browsing.cancel()
        await asyncio.gather(browsing, return_exceptions=True)


async def test_announcing_is_off_unless_asked() -> None:
    cluster_id = f"quiet-{uuid.uuid4().hex[:8]}"
    sightings, _ = recorder()
    browser = MdnsBrowser(sightings, LOOPBACK, settle_seconds=1.0)
    browsing = asyncio.create_task(browser.run())
    try:
        async with announced(Settings(cluster_id=cluster_id,
                                      announce_api_server="https://127.0.0.1:6443")):
            await eventually(sightings.settled)
            assert sightings.of(cluster_id) == []
    finally:
        browsing.cancel()
        await asyncio.gather(browsing, return_exceptions=True)


async def test_dns_sd_records_in_ordinary_dns_are_looked_up() -> None:
    with dns_server() as server:
        publish(server.zone, "providers.test", "eu-1", "provider-eu-1",
                "https://api.eu-1.providers.test:6443")
        # No api= in the TXT record: the SRV target and port stand for it.
        publish(server.zone, "providers.test", "us-1", "provider-us-1", None,
                target="api.us-1.providers.test.", port=443)
        sightings, changed = recorder()
        browser = DnsBrowser(sightings, ("providers.test", "nothing.test"), (server.address,))
        assert not sightings.settled()
        await browser.look()
        assert sightings.settled()
        (eu,) = sightings.of("provider-eu-1")
        assert (eu.source, eu.instance, eu.announcement) == (
            DiscoverySource.DNS, "eu-1._annex._tcp.providers.test.",
            Announcement("provider-eu-1", "https://api.eu-1.providers.test:6443"))
        (us,) = sightings.of("provider-us-1")
        assert us.announcement.api_server_url == "https://api.us-1.providers.test:443"
        assert sorted(changed) == ["provider-eu-1", "provider-us-1"]
        assert ("_annex._tcp.nothing.test.", "PTR") in server.queries

        changed.clear()
        await browser.look()
        assert changed == []  # the same records again: no change

        withdraw(server.zone, "providers.test", "us-1")
        await browser.look()
        assert sightings.of("provider-us-1") == [] and changed == ["provider-us-1"]
        assert sightings.of("provider-eu-1") == [eu]  # untouched, `since` kept

    # The server is gone: a domain that cannot be asked keeps what it showed last.
    await browser.look()
    assert sightings.of("provider-eu-1") == [eu]


@pytest.mark.parametrize("txt", [['"api=https://x:1"'], ['"cluster-id=c"', '"api=ftp://x"']])
async def test_records_naming_no_cluster_or_no_usable_address_are_ignored(txt: list[str]) -> None:
    with dns_server() as server:
        publish(server.zone, "bad.test", "broken", "unused", None)
        server.zone["broken._annex._tcp.bad.test."]["TXT"] = [" ".join(txt)]
        sightings, _ = recorder()
        await DnsBrowser(sightings, ("bad.test",), (server.address,)).look()
        assert list(sightings.clusters()) == []


async def test_an_announcement_that_cannot_be_made_leaves_the_enforcer_running(
        caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings(cluster_id="nowhere", announce_mdns=True,
                        announce_api_server="https://127.0.0.1:6443",
                        mdns_interfaces=("203.0.113.77",))  # no such interface here
    entered = False
    async with announced(settings):
        entered = True
    assert entered
    assert any("cannot announce" in record.message and record.levelname == "ERROR"
               for record in caplog.records)


async def test_a_browser_that_cannot_browse_says_so_and_stops_no_one() -> None:
    sightings, _ = recorder()
    browser = MdnsBrowser(sightings, ("203.0.113.77",))  # no such interface here
    assert not sightings.settled() and sightings.looking(DiscoverySource.MDNS)
    await asyncio.wait_for(browser.run(), timeout=30)
    assert sightings.settled() and not sightings.looking(DiscoverySource.MDNS)
