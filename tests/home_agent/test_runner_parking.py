"""Keys taken before their mirrors are listed wait, parked, without cycling through the workers:
they still count as queued (the agent has not converged), are never taken twice, and go back in
line once their side is listed."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Any

from annex.controller import Controller
from home_agent.agent import NODE_KEY, TWINS_KEY, Agent, pod_key
from home_agent.assembly import agent_keys
from home_agent.config import AgentConfig
from home_agent.metrics import Metrics
from home_agent.runner import build_controller


def agent() -> Agent:
    no_client: Any = None  # nothing here talks to a cluster
    return Agent(AgentConfig("home", "remote", "remote.kubeconfig"), no_client, no_client)


def controller(state: Agent) -> Controller[Hashable]:
    nothing: Any = None  # no watch is moved, no node reconciled
    return build_controller(agent_keys(state, nothing), nothing, nothing, None, Metrics())


def take(state: Agent) -> Any:
    assert state.queue.pending()
    return state.queue.take()


def park(controller: Controller[Hashable], key: Hashable) -> None:
    """A worker takes `key` before its mirrors are listed."""
    asyncio.run(controller.process(key))


def test_a_parked_key_counts_as_queued_and_is_not_ready_until_its_side_is_listed() -> None:
    state = agent()
    parked = controller(state)
    state.enqueue(pod_key("ns", "web"))
    park(parked, take(state))

    parked.release_parked()
    assert len(state.queue) == 1 and not state.queue.pending()

    state.home_synced.set()
    parked.release_parked()  # a pod also needs the remote side
    assert not state.queue.pending()

    state.tenant_synced.set()
    state.twins_synced.set()
    parked.release_parked()
    assert take(state) == pod_key("ns", "web")


def test_a_key_added_again_while_parked_comes_back_once() -> None:
    state = agent()
    parked = controller(state)
    state.enqueue(pod_key("ns", "web"))
    park(parked, take(state))
    state.enqueue(pod_key("ns", "web"))  # a watch event meanwhile
    assert not state.queue.pending()

    for synced in (state.home_synced, state.tenant_synced, state.twins_synced):
        synced.set()
    parked.release_parked()
    key = take(state)
    state.queue.done(key)
    assert key == pod_key("ns", "web") and len(state.queue) == 0


def test_each_key_waits_only_for_the_listings_it_needs() -> None:
    state = agent()
    parked = controller(state)
    for key in (NODE_KEY, pod_key("ns", "web")):
        state.enqueue(key)
        park(parked, take(state))

    state.home_synced.set()
    parked.release_parked()
    assert take(state) == NODE_KEY  # the node needs the home side only
    assert not state.queue.pending()


def test_a_standby_parks_every_key_that_writes_until_it_leads() -> None:
    """Active/passive replicas: a standby's keys wait parked, its mirrors listed, until it
    leads; only the twins key (it moves the ShadowPod watch, and writes nothing) is taken."""
    state = agent()
    leading = False
    nothing: Any = None  # no watch is moved, no node reconciled
    standby = build_controller(agent_keys(state, nothing), nothing, nothing, None,
                               Metrics(), lambda: leading)
    for synced in (state.home_synced, state.tenant_synced, state.twins_synced):
        synced.set()
    for key in (NODE_KEY, pod_key("ns", "web"), TWINS_KEY):
        state.enqueue(key)
    park(standby, take(state))
    park(standby, take(state))
    assert take(state) == TWINS_KEY  # not parked: the watch follows on a standby too
    state.queue.done(TWINS_KEY)
    standby.release_parked()
    assert not state.queue.pending() and len(state.queue) == 2

    leading = True
    standby.release_parked()
    assert {take(state), take(state)} == {NODE_KEY, pod_key("ns", "web")}
