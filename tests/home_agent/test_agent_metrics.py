"""/metrics counts the agent's reconciles per key kind (what benchmarks read) and per controller
(`annex.metrics.ControllerCollector`), the reflection's controllers included."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from prometheus_client import generate_latest

from home_agent.agent import pod_key
from home_agent.assembly import COMPANIONS, agent_figures, agent_keys, reflection_for
from home_agent.metrics import Metrics
from home_agent.reflection.kinds import KINDS
from home_agent.runner import build_controller
from tests.helpers import metric_samples, sample
from tests.home_agent.test_reflection import _agent, listed


def test_a_pod_reconcile_is_counted_per_key_kind_and_per_controller() -> None:
    agent, _, _ = _agent(reflection_workers={"configmap": 1, "event": 1})
    listed(agent)
    reflection = reflection_for(agent, KINDS, COMPANIONS)
    metrics = Metrics()
    nothing: Any = None  # no watch is moved, no node reconciled
    controller = build_controller(agent_keys(agent, nothing), nothing, nothing, None, metrics)
    metrics.controllers = [controller, *reflection.controllers()]
    agent.enqueue(pod_key("app", "web"))  # no such pod, no ShadowPod: nothing to do

    async def process_queued() -> None:
        while agent.queue.pending():
            await controller.process(agent.queue.take())

    asyncio.run(process_queued())
    found = metric_samples(generate_latest(metrics.registry(agent_figures(agent))).decode())
    assert sample(found, "annex_home_agent_reconciles_total", kind="pod", result="success") == 1
    assert sample(found, "annex_home_agent_controller_reconciles_total", controller="agent",
                  result="success") == 1
    assert sample(found, "controller_runtime_reconcile_total", controller="agent",
                  result="success") == 1
    for name in ("agent", "configmaps", "events"):
        assert sample(found, "annex_home_agent_controller_queued_keys", controller=name) == 0


def test_the_election_is_exported_as_client_go_names_it() -> None:
    agent, _, _ = _agent()
    metrics = Metrics()
    leading = False
    metrics.leading = lambda: leading
    metrics.elector = SimpleNamespace(name="annex-agent-remote", transitions=3)  # type: ignore[assignment]

    def scraped() -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        return metric_samples(generate_latest(metrics.registry(agent_figures(agent))).decode())

    assert sample(scraped(), "leader_election_master_status", name="annex-agent-remote") == 0
    leading = True
    found = scraped()
    assert sample(found, "leader_election_master_status", name="annex-agent-remote") == 1
    assert sample(found, "annex_leader_election_transitions", name="annex-agent-remote") == 3
