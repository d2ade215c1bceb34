"""An enforcer killed in the middle of a burst and restarted converges without duplicates
(ShadowPods keep their pods; no pod is recreated twice)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.helpers import wait_for
from tests.remote_enforcer.conftest import (
    ShadowPods,
    make_twin_namespace,
    new_name,
    room_for_pods,
    settled,
    shadowpod,
)

CONSUMER = "consumer-restart"
BURST = 30


@pytest.fixture(scope="module", autouse=True)
def quota(remote: Any, enforcer: Any) -> None:
    room_for_pods(remote, CONSUMER)


def test_a_kill_mid_burst_leaves_one_pod_per_shadowpod(
        remote: Any, enforcer: Any, shadowpods: ShadowPods) -> None:
    twin = make_twin_namespace(remote, CONSUMER)
    names = [new_name("burst") for _ in range(BURST)]
    with ThreadPoolExecutor(max_workers=10) as pool:
        list(pool.map(lambda name: shadowpods.create(twin, shadowpod(name, CONSUMER)), names))
    enforcer.kill()  # while it is still creating pods
    enforcer.start()

    def all_running() -> bool:
        return all(shadowpods.status(twin, name).get("phase") == "Running" for name in names)
    wait_for(all_running, timeout=60, message="not every ShadowPod got a running pod")

    pods = {pod.metadata.name: pod for pod in remote.core.list_namespaced_pod(twin).items}
    assert sorted(pods) == sorted(names)
    for name in names:
        shadow = shadowpods.get(twin, name)
        [owner] = pods[name].metadata.owner_references
        assert owner.uid == shadow["metadata"]["uid"]
        assert shadow["status"].get("recreations", 0) == 0
        assert shadow["status"]["podStatus"]["podIP"] == pods[name].status.pod_ip


def test_a_restart_writes_nothing_for_unchanged_shadowpods_and_pods(
        remote: Any, enforcer: Any, shadowpods: ShadowPods) -> None:
    twin = make_twin_namespace(remote, CONSUMER)
    names = [new_name("steady") for _ in range(5)]
    for name in names:
        shadowpods.create(twin, shadowpod(name, CONSUMER))
    for name in names:
        settled(shadowpods, twin, name)

    def versions() -> dict[str, tuple[str, str]]:
        pods = {p.metadata.name: p.metadata.resource_version
                for p in remote.core.list_namespaced_pod(twin).items}
        return {name: (shadowpods.get(twin, name)["metadata"]["resourceVersion"], pods[name])
                for name in names}
    before = versions()

    enforcer.kill()
    enforcer.start()
    # The marker's events come after the relisted objects' in the same watch streams: once
    # the marker runs, the enforcer has been through the others.
    marker = new_name("marker")
    shadowpods.create(twin, shadowpod(marker, CONSUMER))
    settled(shadowpods, twin, marker)

    assert versions() == before
