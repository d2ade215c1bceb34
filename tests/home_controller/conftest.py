"""The home controller as a real process against the `home` cluster (kubesim, or a real one),
its log printed when a test fails."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from remote_enforcer.announce import announced
from remote_enforcer.settings import Settings as EnforcerSettings
from tests.conftest import ClusterHandle
from tests.home_agent import conftest as agent_fixtures
from tests.home_agent.agentproc import Process

crds = agent_fixtures.crds


@pytest.fixture
def start_controller(home: ClusterHandle, crds: None, tmp_path: Path,
                     request: pytest.FixtureRequest) -> Iterator[Any]:
    """start_controller(*flags) → Process of `python -m home_controller`, stopped afterwards
    (its log shown when the test failed)."""
    started: list[Process] = []

    def start(*flags: str) -> Process:
        process = Process(["-m", "home_controller", "--kubeconfig", str(home.kubeconfig),
                           "--health-port", "0", "--log-level", "DEBUG", *flags],
                          tmp_path / f"controller-{len(started)}.log")
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()
        if getattr(request.node, "rep_call", None) is None or request.node.rep_call.failed:
            print(f"--- {process.log_path.name}\n{process.output()}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@contextmanager
def mdns_announcement(cluster_id: str, api: str) -> Iterator[None]:
    """The enforcer's announcer, on the loopback interface, in a thread with its own loop (the
    test's own calls block), withdrawn (goodbye packets) on exit."""
    settings = EnforcerSettings(cluster_id=cluster_id, announce_mdns=True,
                                announce_api_server=api, mdns_interfaces=("127.0.0.1",))
    loop = asyncio.new_event_loop()
    up, down = threading.Event(), asyncio.Event()
    failure: list[BaseException] = []

    async def announce() -> None:
        try:
            async with announced(settings):
                up.set()
                await down.wait()
        except BaseException as error:
            failure.append(error)
            up.set()

    thread = threading.Thread(target=loop.run_until_complete, args=(announce(),), daemon=True)
    thread.start()
    try:
        assert up.wait(30), "the announcement did not start"
        assert not failure, failure
        yield
    finally:
        loop.call_soon_threadsafe(down.set)
        thread.join(30)
        loop.close()
