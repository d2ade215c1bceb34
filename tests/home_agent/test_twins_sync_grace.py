"""The twins watch counts as listed before its listing completes only when the listing stops
bringing objects for a grace period: a long listing is never cut short (the agent would act on
half-filled mirrors), one that never completes does not hold the agent forever."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from home_agent import remote_watch
from home_agent.agent import REMOTE, Agent
from home_agent.assembly import agent_routes, remote_watch_sources
from home_agent.config import AgentConfig
from home_agent.remote_watch import RemoteWatches
from home_agent.routes import declare_agent
from shared.api.shadowpod import SHADOWPOD
from tests.helpers import until

GRACE = 1.0


class WatchNeverListed:
    """Stands for the twins watch: the test feeds its sink; its listing never completes."""

    started: list[WatchNeverListed] = []

    def __init__(self, connection: Any, spec: Any, sink: Any, on_synced: Any) -> None:
        self.sink = sink

    def start(self) -> None:
        WatchNeverListed.started.append(self)

    def stop(self) -> None:
        pass


@pytest.fixture
def watches(monkeypatch: pytest.MonkeyPatch) -> RemoteWatches:
    monkeypatch.setattr(remote_watch, "TWINS_SYNC_GRACE", GRACE)
    monkeypatch.setattr(remote_watch, "Watch", WatchNeverListed)
    connection: Any = type("Remote", (), {"connection": None, "live": None})()
    agent = Agent(AgentConfig("home", "remote", "remote.kubeconfig"), connection, connection)
    declare_agent(agent_routes(agent))
    agent.mirrors.namespace_maps.apply(None, {
        "metadata": {"namespace": agent.tenant_namespace, "name": agent.namespace_map_name},
        "spec": {"desiredMapping": {"web": "web-home"}},
        "status": {"currentMapping": {"web": {"remoteNamespace": "web-home",
                                              "phase": "Accepted"}}}})
    WatchNeverListed.started.clear()
    return RemoteWatches(remote_watch_sources(agent))


def shadow_pod(name: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "web-home", "name": name}}


def test_a_listing_still_bringing_objects_is_not_cut_short(watches: RemoteWatches) -> None:
    async def scenario() -> int:
        watches.follow_twins()
        (watch,) = WatchNeverListed.started
        deadline = time.monotonic() + 3 * GRACE
        index = 0
        while time.monotonic() < deadline:
            watch.sink("shadowpods", "ADDED", shadow_pod(f"p{index}"))
            index += 1
            assert not watches.sources.twins_synced.is_set()
            await asyncio.sleep(GRACE / 20)  # the pace of a listing, not a wait
        await until(watches.sources.twins_synced.is_set,
                    "listed once no new object came for the grace period", 10 * GRACE,
                    GRACE / 50)
        return index

    listed = asyncio.run(scenario())
    assert len(watches.sources.informers.mirror(REMOTE, SHADOWPOD.plural).keys()) == listed


def test_a_listing_that_brings_nothing_counts_as_listed_after_the_grace_period(
        watches: RemoteWatches) -> None:
    async def scenario() -> None:
        watches.follow_twins()
        await until(watches.sources.twins_synced.is_set, "listed after the grace period",
                    10 * GRACE, GRACE / 50)

    asyncio.run(scenario())
