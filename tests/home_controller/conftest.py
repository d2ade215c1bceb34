"""The home controller as a real process against the `home` cluster (kubesim, or a real one),
its log printed when a test fails."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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
