"""/healthz (the process serves), /readyz (watches and the webhook are up) and /metrics."""

from __future__ import annotations

import asyncio

from aiohttp import web

from remote_enforcer.metrics import Metrics


async def start_health(address: str, port: int, ready: asyncio.Event,
                       metrics: Metrics) -> web.AppRunner:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        return web.Response(text="ok") if ready.is_set() else web.Response(
            status=503, text="starting")

    async def scrape(_: web.Request) -> web.Response:
        return web.Response(text=metrics.exposition(), content_type="text/plain",
                            charset="utf-8")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", scrape)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, address, port).start()
    return runner
