"""The virtual node's kubelet API counts its requests by route (the path pattern, not one series
per pod), refusals included: what `annex_kubelet_requests_*` show."""

from __future__ import annotations

from typing import Any

import aiohttp
from aiohttp import web

from annex.metrics import ServedRequests
from home_agent.kubelet.server import KUBELET_REQUESTS, KubeletApi, route_of
from tests.annex.test_metrics import scraped
from tests.helpers import free_port, sample

LOGS = "/containerLogs/{namespace}/{pod}/{container}"


async def test_requests_are_counted_by_route_refusals_included() -> None:
    served = ServedRequests(KUBELET_REQUESTS, route_of)
    nothing: Any = None  # an anonymous caller is refused before anything else is read
    api = KubeletApi("liqo-r", nothing, nothing, nothing, False, nothing, served)
    runner = web.AppRunner(api.application())
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}") as http:
            for path in ("/containerLogs/app/web/main", "/containerLogs/app/api/main", "/pods",
                         "/nowhere"):
                async with http.get(path) as answer:
                    assert answer.status == 401
    finally:
        await runner.cleanup()
    found = scraped(served)
    assert sample(found, "annex_kubelet_requests_total", route=LOGS, code="401") == 2
    assert sample(found, "annex_kubelet_requests_total", route="/pods", code="401") == 1
    assert sample(found, "annex_kubelet_requests_total", route="unmatched", code="401") == 1
    assert sample(found, "annex_kubelet_request_duration_seconds_count", route=LOGS) == 2
    assert sample(found, "annex_kubelet_requests_in_flight", route=LOGS) == 0
