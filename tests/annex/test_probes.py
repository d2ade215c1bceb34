"""The probe server every component runs: /healthz always, /readyz only once ready, /metrics as
the component's handler answers (`annex.metrics.metrics_handler`)."""

from __future__ import annotations

import aiohttp
from aiohttp import web

from annex.probes import serve_probes
from tests.helpers import free_port


async def _scrape(_: web.Request) -> web.Response:
    return web.Response(text="x_total 1\n", content_type="text/plain")


async def test_readyz_follows_the_ready_callback_and_metrics_serves_the_scrape() -> None:
    ready = False
    port = free_port()
    runner = await serve_probes("127.0.0.1", port, ready=lambda: ready, not_ready="starting",
                                scrape=_scrape)
    try:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}") as http:
            async with http.get("/healthz") as answer:
                assert answer.status == 200
            async with http.get("/readyz") as answer:
                assert (answer.status, await answer.text()) == (503, "starting")
            ready = True
            async with http.get("/readyz") as answer:
                assert answer.status == 200
            async with http.get("/metrics") as answer:
                assert answer.content_type == "text/plain"
                assert await answer.text() == "x_total 1\n"
    finally:
        await runner.cleanup()
