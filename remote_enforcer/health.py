"""/healthz (the process serves) and /readyz (watches and the webhook are up) for probes."""

from __future__ import annotations

import asyncio

from aiohttp import web


async def start_health(address: str, port: int, ready: asyncio.Event) -> web.AppRunner:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        return web.Response(text="ok") if ready.is_set() else web.Response(
            status=503, text="starting")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, address, port).start()
    return runner
