"""The plain-HTTP probe and scrape endpoints every component serves: /healthz (the process
answers), /readyz (the component says it is ready) and Prometheus /metrics (its handler:
`annex.metrics.metrics_handler`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web


async def serve_probes(host: str, port: int, *, ready: Callable[[], bool], not_ready: str,
                       scrape: Callable[[web.Request], Awaitable[web.StreamResponse]],
                       ready_text: Callable[[], str] = lambda: "ok") -> web.AppRunner:
    """Serve the probes and /metrics on host:port until the returned runner is cleaned up.
    /readyz answers 503 with the `not_ready` text while `ready()` is false, else 200 with
    `ready_text()`."""

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        if ready():
            return web.Response(text=ready_text())
        return web.Response(text=not_ready, status=503)

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", scrape)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
