"""/healthz, /readyz and Prometheus /metrics on the metrics address (plain HTTP, for probes and
scraping). Ready means the home side is listed: the pod webhook answers from it."""

from __future__ import annotations

import logging
import threading
from collections import Counter

from aiohttp import web

from home_agent.agent import Agent

log = logging.getLogger(__name__)


class Metrics:
    """Reconcile outcomes per key kind, thread-safe (workers count, the server reads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reconciles: Counter[tuple[str, str]] = Counter()

    def reconciled(self, kind: str, result: str) -> None:
        with self._lock:
            self._reconciles[(kind, result)] += 1

    def exposition(self, agent: Agent) -> str:
        lines = [
            "# HELP annex_home_agent_reconciles_total Reconciles by key kind and result.",
            "# TYPE annex_home_agent_reconciles_total counter",
        ]
        with self._lock:
            for (kind, result), count in sorted(self._reconciles.items()):
                lines.append(f'annex_home_agent_reconciles_total{{kind="{kind}",'
                             f'result="{result}"}} {count}')
        remote_ready = 1 if agent.health.ready else 0
        lines += [
            "# HELP annex_home_agent_remote_ready 1 while the remote API server answers.",
            "# TYPE annex_home_agent_remote_ready gauge",
            f"annex_home_agent_remote_ready {remote_ready}",
            "# HELP annex_home_agent_pods Pods bound to the virtual node.",
            "# TYPE annex_home_agent_pods gauge",
            f"annex_home_agent_pods {len(agent.mirrors.pods.keys())}",
            "# HELP annex_home_agent_shadow_pods ShadowPods of this agent on the remote.",
            "# TYPE annex_home_agent_shadow_pods gauge",
            f"annex_home_agent_shadow_pods {len(agent.mirrors.shadow_pods.keys())}",
        ]
        return "\n".join(lines) + "\n"


async def serve(agent: Agent, metrics: Metrics) -> web.AppRunner | None:
    address = agent.config.metrics_address
    if not address:
        return None

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        if agent.home_synced.is_set():
            return web.Response(text="ok")
        return web.Response(text="home cluster not listed yet", status=503)

    async def scrape(_: web.Request) -> web.Response:
        return web.Response(text=metrics.exposition(agent),
                            content_type="text/plain", charset="utf-8")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", scrape)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    host, _, port = address.rpartition(":")
    await web.TCPSite(runner, host or "0.0.0.0", int(port)).start()
    log.info("metrics and probes on http://%s", address)
    return runner
