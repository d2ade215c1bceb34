"""An enforcer killed in the middle of a burst and restarted converges without duplicates
(DESIGN.md section 8: ShadowPods keep their pods; no pod is recreated twice)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.helpers import wait_for
from tests.remote_enforcer.conftest import (
    ShadowPods,
    make_twin_namespace,
    new_name,
    shadowpod,
)

CONSUMER = "consumer-restart"
BURST = 30


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
