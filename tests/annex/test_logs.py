"""Each reconcile's log lines name its object as controller-runtime's do (controller, namespace,
name, reconcileID, cluster): one JSON object per line for collectors, the same fields after the
message in text; all lines of one reconcile, the runtime's failure line included, share its
reconcileID, and no two reconciles share one. A JSON line carries the extras it was logged with
and a UTC time."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator

import pytest

from annex.controller import Controller
from annex.logs import JsonFormatter, TextFormatter, configure_logging, reconciling
from annex.workqueue import KeyQueue
from tests.annex.test_controller import running, stopped
from tests.helpers import until

log = logging.getLogger("annex.test_logs")


@pytest.fixture
def captured(request: pytest.FixtureRequest) -> Iterator[io.StringIO]:
    """What the root logger writes, formatted by the formatter `request.param` names."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if request.param == "json" else TextFormatter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


async def _reconcile_twice_and_fail_once() -> None:
    """Keys (ns, a) and (ns, b) reconciled, each logging two lines; (ns, b) fails its first
    time (the runtime logs the failure) and succeeds on the retry."""
    failed: list[str] = []

    async def reconcile(key: tuple[str, str]) -> None:
        log.info("looking at %s", key[1])
        await asyncio.sleep(0)  # another worker's reconcile runs meanwhile
        log.info("done with %s", key[1])
        if key[1] == "b" and not failed:
            failed.append(key[1])
            raise RuntimeError("the server is away")

    controller: Controller[tuple[str, str]] = Controller(
        "widgets", reconcile, workers=2, queue=KeyQueue(base_delay=0.01),
        cluster=lambda key: "provider-1")
    task = await running(controller)  # type: ignore[arg-type]
    controller.add(("ns", "a"))
    controller.add(("ns", "b"))
    await until(lambda: controller.outcomes() == {"success": 2, "error": 1}
                and len(controller) == 0, "two successes and a failure, nothing left")
    await stopped(controller, task)  # type: ignore[arg-type]


@pytest.mark.parametrize("captured", ["json"], indirect=True)
async def test_json_lines_of_a_reconcile_carry_its_object_and_one_reconcile_id(
        captured: io.StringIO) -> None:
    await _reconcile_twice_and_fail_once()
    entries = [json.loads(line) for line in captured.getvalue().splitlines()]
    ours = [e for e in entries if e.get("controller") == "widgets"]
    assert {(e["namespace"], e["name"], e["cluster"]) for e in ours} == {
        ("ns", "a", "provider-1"), ("ns", "b", "provider-1")}
    by_id: dict[str, list[dict[str, str]]] = {}
    for entry in ours:
        by_id.setdefault(entry["reconcileID"], []).append(entry)
    # Three reconciles: a, b's failed one (its two lines and the runtime's warning), b again.
    assert sorted(len(lines) for lines in by_id.values()) == [2, 2, 3]
    for lines in by_id.values():
        assert len({(e["namespace"], e["name"]) for e in lines}) == 1
    [failed] = [lines for lines in by_id.values() if len(lines) == 3]
    assert [e["message"] for e in failed][:2] == ["looking at b", "done with b"]
    assert failed[2]["level"] == "WARNING" and "the server is away" in failed[2]["message"]
    assert failed[2]["logger"] == "annex.controller"


@pytest.mark.parametrize("captured", ["text"], indirect=True)
async def test_text_lines_end_with_the_object_readably(captured: io.StringIO) -> None:
    await _reconcile_twice_and_fail_once()
    lines = [line for line in captured.getvalue().splitlines() if "controller=widgets" in line]
    assert len(lines) == 7
    [first] = [line for line in lines if "looking at a" in line]
    message, fields = first.split(": looking at a ")
    assert message.endswith("INFO annex.test_logs")
    pairs = dict(pair.split("=", 1) for pair in fields.split(" "))
    assert list(pairs) == ["controller", "namespace", "name", "reconcileID", "cluster"]
    assert (pairs["controller"], pairs["namespace"], pairs["name"], pairs["cluster"]) == (
        "widgets", "ns", "a", "provider-1")
    # The other line of the same reconcile carries the same id.
    assert sum(f"reconcileID={pairs['reconcileID']}" in line for line in lines) == 2


@pytest.mark.parametrize("captured", ["text"], indirect=True)
def test_outside_a_reconcile_a_line_is_plain_and_a_value_with_blanks_is_quoted(
        captured: io.StringIO) -> None:
    log.info("starting")
    with reconciling("namespacemaps", "annex-tenant-home", "my map"):
        log.info("converged")
    first, second = captured.getvalue().splitlines()
    assert first.endswith("INFO annex.test_logs: starting")
    assert second.endswith(': converged controller=namespacemaps namespace=annex-tenant-home '
                           'name="my map" reconcileID=' + second.rsplit("=", 1)[1])


def test_the_process_cluster_tags_every_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("json", "INFO", cluster="remote-1")
    try:
        log.info("started")
        with reconciling("agent", "ns", "web"):
            log.info("offloaded")
    finally:
        configure_logging("text", "WARNING")
    started, offloaded = (json.loads(line) for line in capsys.readouterr().err.splitlines())
    assert started["cluster"] == "remote-1" and "reconcileID" not in started
    assert (offloaded["cluster"], offloaded["namespace"], offloaded["name"]) == (
        "remote-1", "ns", "web")


def test_json_logs_are_one_object_per_line_with_extras(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    configure_logging("json", "INFO")
    try:
        logging.getLogger("annex.test").info("created %s", "pod", extra={"namespace": "ns"})
        logging.getLogger("annex.test").debug("hidden")
    finally:
        configure_logging("text", "WARNING")
    [line] = capsys.readouterr().err.strip().splitlines()
    entry = json.loads(line)
    assert (entry["level"], entry["logger"], entry["message"], entry["namespace"]) == (
        "INFO", "annex.test", "created pod", "ns")
    assert entry["time"].endswith("+00:00")
