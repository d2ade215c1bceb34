"""annex.metrics: the controller-runtime and workqueue families of a Controller, as Prometheus
parses them; the exposition format the scraper asks for; label values escaped; the process,
Python and build families; webhook requests timed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import generate_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
from prometheus_client.parser import text_string_to_metric_families

from annex.controller import RETRY, Controller, Result
from annex.metrics import (
    ControllerCollector,
    Family,
    Gauges,
    RequestCollector,
    ServedRequests,
    declared_families,
    metrics_handler,
    registry,
)
from annex.metrics_histogram import Histogram
from annex.request_metrics import RequestMetrics
from annex.workqueue import KeyQueue
from tests.helpers import free_port, metric_samples, sample, until

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scraped(*collectors: Any) -> Samples:
    return metric_samples(generate_latest(registry("test", collectors)).decode())


async def test_a_controller_exports_controller_runtimes_families_and_they_move_with_work() -> None:
    tried: set[str] = set()

    async def reconcile(key: str) -> Result | None:
        first, _ = key not in tried, tried.add(key)
        if key == "broken" and first:
            raise RuntimeError("the first try fails")
        if key == "waits" and first:
            return RETRY
        if key == "later":
            return Result(requeue_after=3600)
        return None

    controller = Controller("pods", reconcile, workers=2,
                            queue=KeyQueue(base_delay=0.01, max_delay=0.01))
    collector = ControllerCollector("annex_test", lambda: [controller])
    before = scraped(collector)
    # Every result is exported from the start, at 0, as controller-runtime initialises them.
    for result in ("success", "error", "requeue", "requeue_after"):
        assert sample(before, "controller_runtime_reconcile_total", controller="pods",
                      result=result) == 0
    assert sample(before, "workqueue_depth", name="pods") == 0
    assert sample(before, "controller_runtime_max_concurrent_reconciles", controller="pods") == 2

    task = asyncio.create_task(controller.run())
    try:
        for key in ("ok", "broken", "waits", "later"):
            controller.add(key)
        await until(lambda: sum(controller.results().values()) >= 6, "six reconciles")
    finally:
        controller.stop()
        await task
    found = scraped(collector)

    def reconciles(result: str) -> float | None:
        return sample(found, "controller_runtime_reconcile_total", controller="pods",
                      result=result)

    assert [reconciles(r) for r in ("success", "error", "requeue", "requeue_after")] == [
        3, 1, 1, 1]
    assert sample(found, "controller_runtime_reconcile_errors_total", controller="pods") == 1
    assert sample(found, "controller_runtime_reconcile_time_seconds_count",
                  controller="pods") == 6
    assert sample(found, "controller_runtime_reconcile_time_seconds_bucket", controller="pods",
                  le="+Inf") == 6
    # Four keys added, two added again after their backoff (the retries).
    assert sample(found, "workqueue_adds_total", name="pods") == 6
    assert sample(found, "workqueue_retries_total", name="pods") == 2
    assert sample(found, "workqueue_queue_duration_seconds_count", name="pods") == 6
    assert sample(found, "workqueue_work_duration_seconds_count", name="pods") == 6
    assert sample(found, "workqueue_depth", name="pods") == 0
    # The component's own names of the same counts.
    assert sample(found, "annex_test_controller_reconciles_total", controller="pods",
                  result="error") == 1
    # "later" is a planned look, not pending work.
    assert sample(found, "annex_test_controller_queued_keys", controller="pods") == 0


def test_a_histogram_counts_a_value_on_a_bound_in_that_bucket_cumulatively() -> None:
    histogram = Histogram((0.1, 1.0))
    for seconds in (0.05, 0.1, 0.5, 2.0):
        histogram.observe(seconds)
    assert histogram.snapshot() == ([("0.1", 2.0), ("1.0", 3.0), ("+Inf", 4.0)], 2.65)


def test_the_queue_counts_how_long_keys_waited_and_the_oldest_wait() -> None:
    queue = KeyQueue()
    before = time.monotonic()
    queue.add("a")
    queue.add("a")  # already waiting: not another add
    queue.add("b", priority=1)
    after = time.monotonic()
    assert (queue.adds, queue.depth()) == (2, 2)
    assert 5 <= queue.longest_wait(after + 5) <= 5 + (after - before)  # since a came
    assert queue.take() == "b"
    assert queue.take() == "a"
    assert queue.queue_duration.snapshot()[0][-1] == ("+Inf", 2.0)
    assert queue.longest_wait(after + 5) == 0


def test_label_values_are_escaped_and_read_back_whole() -> None:
    awkward = 'a "quoted"\\path\nnext line'
    found = scraped(Gauges([(Family("x_things", "gauge", "Things.", ("name",)),
                             lambda: [([awkward], 1.0)])]))
    assert sample(found, "x_things", name=awkward) == 1


def test_process_python_and_build_families_are_exported() -> None:
    found = scraped()
    names = {name for name, _ in found}
    assert {"process_cpu_seconds_total", "process_resident_memory_bytes", "python_info",
            "python_gc_collections_total"} <= names
    info = next(dict(labels) for name, labels in found if name == "annex_build_info")
    assert info["component"] == "test" and info["version"]


def test_declared_families_name_what_a_scrape_shows() -> None:
    requests = RequestMetrics()
    requests.count("h:1", "GET", "/api/v1/pods", "200")
    requests.observe("h:1", "GET", 0.2)
    collectors = [RequestCollector(requests)]
    declared = {name for family in declared_families(collectors)
                for name in family.series_names()}
    assert {name for name, _ in scraped(*collectors)} - {
        name for name, _ in scraped()} == declared


@pytest.fixture
def served() -> Iterator[tuple[ServedRequests, list[float]]]:
    clock = [0.0]
    yield ServedRequests(clock=lambda: clock[0]), clock


async def test_webhook_requests_are_timed_and_counted_by_path_and_code(
        served: tuple[ServedRequests, list[float]]) -> None:
    counter, clock = served

    async def admit(_: web.Request) -> web.Response:
        clock[0] += 0.3
        return web.json_response({})

    async def refuse(_: web.Request) -> web.Response:
        raise web.HTTPBadRequest()

    app = web.Application(middlewares=[counter.middleware])
    app.router.add_post("/validate", admit)
    app.router.add_post("/broken", refuse)
    port = free_port()
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}") as http:
            for path in ("/validate", "/validate", "/broken"):
                async with http.post(path, json={}) as answer:
                    await answer.read()
    finally:
        await runner.cleanup()
    found = scraped(counter)
    assert sample(found, "controller_runtime_webhook_requests_total", webhook="/validate",
                  code="200") == 2
    assert sample(found, "controller_runtime_webhook_requests_total", webhook="/broken",
                  code="400") == 1
    assert sample(found, "controller_runtime_webhook_latency_seconds_bucket",
                  webhook="/validate", le="0.25") == 0
    assert sample(found, "controller_runtime_webhook_latency_seconds_bucket",
                  webhook="/validate", le="0.5") == 2
    assert sample(found, "controller_runtime_webhook_requests_in_flight",
                  webhook="/validate") == 0


async def test_the_scrape_is_openmetrics_when_the_scraper_asks_for_it() -> None:
    port = free_port()
    app = web.Application()
    app.router.add_get("/metrics", metrics_handler(registry("test", [])))
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}") as http:
            async with http.get("/metrics") as answer:
                plain = answer.headers["Content-Type"], await answer.text()
            # What Prometheus sends.
            accept = ("application/openmetrics-text;version=1.0.0;q=0.5,"
                      "text/plain;version=0.0.4;q=0.4,*/*;q=0.1")
            async with http.get("/metrics", headers={"Accept": accept}) as answer:
                open_metrics = answer.headers["Content-Type"], await answer.text()
    finally:
        await runner.cleanup()
    assert plain[0].startswith("text/plain; version=0.0.4")
    assert any(family.name == "annex_build_info"
               for family in text_string_to_metric_families(plain[1]))
    assert open_metrics[0].startswith("application/openmetrics-text; version=1.0.0")
    assert open_metrics[1].endswith("# EOF\n")
    assert any(family.name == "annex_build_info" for family in openmetrics(open_metrics[1]))
