"""The plain-HTTP probe and scrape endpoints both components serve: /healthz (the process
answers), /readyz (the component says it is ready) and Prometheus /metrics (text format 0.0.4).

Each component keeps its own counters; they render them with `metric_family` and hand the
server a function that returns the whole exposition."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from aiohttp import web

MetricKind = str  # "counter" or "gauge": the Prometheus TYPE of a family


def metric_family(name: str, kind: MetricKind, help_text: str,
                  samples: Iterable[tuple[str, float]]) -> list[str]:
    """The HELP and TYPE lines of family `name`, then one line per (rendered labels, value)
    sample; empty labels ('') give the bare series name."""
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    lines += [f"{name}{{{labels}}} {value}" if labels else f"{name} {value}"
              for labels, value in samples]
    return lines


def exposition(lines: Iterable[str]) -> str:
    """The scrape body: the lines, each ended by a newline."""
    return "\n".join(lines) + "\n"


async def serve_probes(host: str, port: int, *, ready: Callable[[], bool], not_ready: str,
                       scrape: Callable[[], str],
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

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(text=scrape(), content_type="text/plain", charset="utf-8")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
