"""The probe server both components run: /healthz always, /readyz only once ready, /metrics in
the Prometheus text format."""

from __future__ import annotations

import aiohttp

from annex.probes import exposition, metric_family, serve_probes
from tests.helpers import free_port


def test_a_family_has_help_and_type_then_one_line_per_sample() -> None:
    assert metric_family("x_total", "counter", "Things.", [('r="a"', 2), ("", 1)]) == [
        "# HELP x_total Things.", "# TYPE x_total counter", 'x_total{r="a"} 2', "x_total 1"]
    assert exposition(["a", "b"]) == "a\nb\n"


async def test_readyz_follows_the_ready_callback_and_metrics_serves_the_scrape() -> None:
    ready = False
    port = free_port()
    runner = await serve_probes("127.0.0.1", port, ready=lambda: ready, not_ready="starting",
                                scrape=lambda: "x_total 1\n")
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
