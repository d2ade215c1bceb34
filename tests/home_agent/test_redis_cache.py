"""The optional Redis cache of converged pods (`--redis-url`): a restarted agent skips a pod only
while the pod, its ShadowPod and every other input of the reconcile are exactly as when it was
last found converged; changes made while the agent was down are applied; an unreachable Redis
changes nothing but the speed. Against a real redis-server the harness starts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from home_agent.agent import Agent
from home_agent.assembly import pod_offloader
from home_agent.config import parse_config
from home_agent.synced_cache import SyncedPods
from shared.forge.pod_inputs import PodInputs
from shared.ownership import ownership_labels
from tests.conftest import ClusterHandle
from tests.helpers import free_port, wait_for
from tests.home_agent.play import bound_pod, extend, read_pod, report_shadow_status, shadow_pod
from tests.home_agent.test_pod_offloading import running_status
from tests.redis_server import redis_server, redis_server_binary

pytestmark = pytest.mark.skipif(redis_server_binary() is None,
                                reason="redis-server is not installed (.ci/run installs it)")


@pytest.fixture
def redis_url() -> Iterator[str]:
    with redis_server() as url:
        yield url


def agent(*flags: str) -> Agent:
    """An agent's state with one pod offloaded into an accepted twin namespace."""
    config = parse_config(["--remote-kubeconfig", "remote.kubeconfig", "--cluster-id", "home",
                           "--remote-cluster-id", "remote", *flags])
    no_client: Any = None
    state = Agent(config, no_client, no_client)
    state.mirrors.namespace_maps.apply(None, {
        "metadata": {"namespace": state.tenant_namespace, "name": state.namespace_map_name,
                     "resourceVersion": "10"},
        "spec": {"desiredMapping": {"web": "web-home"}},
        "status": {"currentMapping": {"web": {"remoteNamespace": "web-home",
                                              "phase": "Accepted"}}}})
    state.mirrors.pods.apply(None, {"metadata": {
        "namespace": "web", "name": "p", "resourceVersion": "20"}})
    state.mirrors.shadow_pods.apply(None, {"metadata": {
        "namespace": "web-home", "name": "p", "resourceVersion": "30",
        "labels": ownership_labels("home", "remote")}})
    return state


def inputs(state: Agent) -> PodInputs:
    """What the agent's pod offloader reads to decide on the pod."""
    return pod_offloader(state).gather("web", "p")


async def converged_in_redis(redis_url: str, state: Agent) -> None:
    """What a first agent leaves behind: the pod's reconcile succeeded."""
    first = SyncedPods(redis_url, "home", "remote")
    await first.load()
    unchanged, pod = first.check(inputs(state))
    assert not unchanged
    first.reconciled("web", "p", pod)
    await first.flush()


async def restarted(redis_url: str, state: Agent) -> bool:
    """Whether a restarted agent with these mirrors skips the pod."""
    again = SyncedPods(redis_url, "home", "remote")
    await again.load()
    return again.check(inputs(state))[0]


async def test_an_unchanged_pod_is_skipped_after_a_restart(redis_url: str) -> None:
    await converged_in_redis(redis_url, agent())
    assert await restarted(redis_url, agent())


@pytest.mark.parametrize("change", ["pod", "shadow pod", "namespace map", "flags",
                                    "virtual node", "pod deleting"])
async def test_any_change_of_an_input_while_down_means_a_reconcile(
        redis_url: str, change: str) -> None:
    await converged_in_redis(redis_url, agent())
    state = agent("--agent-ip", "192.0.2.7") if change == "flags" else agent()
    if change == "pod":
        state.mirrors.pods.apply("MODIFIED", {"metadata": {
            "namespace": "web", "name": "p", "resourceVersion": "21"}})
    elif change == "shadow pod":
        state.mirrors.shadow_pods.apply("MODIFIED", {"metadata": {
            "namespace": "web-home", "name": "p", "resourceVersion": "31",
            "labels": ownership_labels("home", "remote")}})
    elif change == "namespace map":  # the twin no longer accepted
        namespace_map = state.mirrors.namespace_maps.values()[0]
        namespace_map["metadata"]["resourceVersion"] = "11"
        namespace_map["status"]["currentMapping"]["web"]["phase"] = "CreationLoopBackOff"
        state.mirrors.namespace_maps.apply("MODIFIED", namespace_map)
    elif change == "virtual node":  # its offloadingPatch: what the ShadowPod carries
        state.mirrors.virtual_nodes.apply("ADDED", {"metadata": {
            "namespace": "default", "name": "vn", "resourceVersion": "40"},
            "spec": {"clusterId": "remote", "offloadingPatch": {
                "labelsNotReflected": ["team"]}}})
    elif change == "pod deleting":
        state.mirrors.pods.apply("MODIFIED", {"metadata": {
            "namespace": "web", "name": "p", "resourceVersion": "20",
            "deletionTimestamp": "2026-01-01T00:00:00Z"}})
    assert not await restarted(redis_url, state)


async def test_flags_a_pod_reconcile_never_reads_keep_the_cache(redis_url: str) -> None:
    await converged_in_redis(redis_url, agent())
    assert await restarted(redis_url, agent("--workers", "32", "--remote-qps", "0"))


async def test_a_virtual_node_of_another_cluster_keeps_the_cache(redis_url: str) -> None:
    await converged_in_redis(redis_url, agent())
    state = agent()
    state.mirrors.virtual_nodes.apply("ADDED", {"metadata": {
        "namespace": "default", "name": "other", "resourceVersion": "41"},
        "spec": {"clusterId": "other", "offloadingPatch": {"labelsNotReflected": ["team"]}}})
    assert await restarted(redis_url, state)


async def test_a_pod_gone_is_forgotten(redis_url: str) -> None:
    await converged_in_redis(redis_url, agent())
    cache = SyncedPods(redis_url, "home", "remote")
    await cache.load()
    cache.reconciled("web", "p", None)  # the reconcile found no pod
    await cache.flush()
    assert not await restarted(redis_url, agent())


async def test_an_unreachable_redis_changes_nothing_but_the_speed() -> None:
    cache = SyncedPods(f"redis://127.0.0.1:{free_port()}/0", "home", "remote")
    await cache.load()
    state = agent()
    unchanged, pod = cache.check(inputs(state))
    assert not unchanged
    cache.reconciled("web", "p", pod)
    await cache.flush()  # logged, not raised


def test_changes_made_while_the_agent_was_down_are_applied_after_a_restart_with_redis(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_agent: Any,
        redis_url: str) -> None:
    agent = start_agent("--redis-url", redis_url)
    twin = extend(home, remote, agent, namespace)
    for name, ip in (("same", "10.0.3.4"), ("changed", "10.0.3.5")):
        bound_pod(home, namespace, name, agent.node_name)
        wait_for(lambda name=name: shadow_pod(remote, twin, name), timeout=30,
                 message="ShadowPod")
        report_shadow_status(remote, twin, name, running_status(ip))
        wait_for(lambda name=name: (read_pod(home, namespace, name).get("status") or {}).get(
            "phase") == "Running", timeout=30, message="home pod Running")
    unchanged_version = read_pod(home, namespace, "same")["metadata"]["resourceVersion"]

    agent.process.kill()
    report_shadow_status(remote, twin, "changed", running_status("10.0.3.99"))
    again = start_agent("--redis-url", redis_url, home_id=agent.home_id,
                        remote_id=agent.remote_id)
    wait_for(lambda: "converged pods known" in again.process.output(), timeout=30,
             message="the cache was read")
    wait_for(lambda: (read_pod(home, namespace, "changed").get("status") or {}).get(
        "podIP") == "10.0.3.99", timeout=30, message="the change made while down applied")
    assert read_pod(home, namespace, "same")["metadata"]["resourceVersion"] == unchanged_version
