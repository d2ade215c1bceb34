"""The enforcer decides from its watch caches, which may lag the API server: what guards each
write it makes from them, and how its per-key runner coalesces events."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from typing import Any

from annex.kubeapi import ApiError
from remote_enforcer.consumers import Consumers
from remote_enforcer.keyed import KeyedRunner
from remote_enforcer.metrics import Metrics
from remote_enforcer.shadowpods import ShadowPodEnforcer, pod_path, shadowpod_path
from shared.forge import enforcement
from shared.ownership import ownership_labels
from shared.wellknown import ORIGIN_CLUSTER_LABEL

NAMESPACE, NAME = "twin", "web"


def shadowpod(version: str, **status: Any) -> dict[str, Any]:
    return {"apiVersion": "offloading.liqo.io/v1beta1", "kind": "ShadowPod",
            "metadata": {"name": NAME, "namespace": NAMESPACE, "uid": "sp-uid",
                         "resourceVersion": version, "generation": 1,
                         "labels": {ORIGIN_CLUSTER_LABEL: "home"}},
            "spec": {"pod": {"containers": [{"name": "main", "image": "nginx"}]}},
            "status": status}


def consumers() -> Consumers:
    """The enforcer's view of its consumers: `twin` is consumer home's twin namespace."""
    known = Consumers("provider")
    known.namespaces.apply("ADDED", {"metadata": {
        "name": NAMESPACE, "labels": ownership_labels("home", "provider")}})
    return known


def running_pod(owner: dict[str, Any]) -> dict[str, Any]:
    pod = enforcement.desired_pod(owner)
    pod["metadata"]["resourceVersion"] = "7"
    pod["spec"]["nodeName"] = "worker"
    pod["status"] = {"phase": "Running"}
    return pod


class FakeApi:
    """Live objects by path; conflicting status writes and every call recorded."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.conflicts = 0

    async def find(self, path: str) -> dict[str, Any] | None:
        self.calls.append(("get", path))
        found = self.objects.get(path)
        return copy.deepcopy(found) if found is not None else None

    async def create(self, path: str, body: dict[str, Any]) -> Any:
        self.calls.append(("create", path))
        return body

    async def patch(self, path: str, patch: Any, content_type: str = "") -> Any:
        self.calls.append(("patch", path))
        if path.endswith("/status") and self.conflicts:
            self.conflicts -= 1
            raise ApiError(409, {"reason": "Conflict"})
        return {}


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 10))


async def settled(enforcer: ShadowPodEnforcer) -> None:
    while len(enforcer.runner):
        await asyncio.sleep(0)


def enforcer_with(api: FakeApi) -> ShadowPodEnforcer:
    enforcer = ShadowPodEnforcer(api, Metrics(), consumers())  # type: ignore[arg-type]
    enforcer.listed.set()
    return enforcer


def test_a_pod_is_created_only_after_its_shadowpod_is_read_live() -> None:
    async def scenario() -> None:
        api = FakeApi()
        enforcer = enforcer_with(api)
        # The cache still holds a ShadowPod the API server no longer has (its pod collected).
        enforcer.on_shadowpod_event("ADDED", shadowpod("1"))
        await settled(enforcer)
        assert ("get", shadowpod_path(NAMESPACE, NAME)) in api.calls
        assert not [call for call in api.calls if call[0] == "create"]

        api.objects[shadowpod_path(NAMESPACE, NAME)] = shadowpod("2")
        enforcer.on_shadowpod_event("MODIFIED", {**shadowpod("2"), "metadata": {
            **shadowpod("2")["metadata"], "labels": {ORIGIN_CLUSTER_LABEL: "home", "v": "2"}}})
        await settled(enforcer)
        assert ("create", pod_path(NAMESPACE)) in api.calls
    run(scenario)


def test_nothing_is_decided_before_both_caches_are_listed() -> None:
    async def scenario() -> None:
        api = FakeApi()
        api.objects[shadowpod_path(NAMESPACE, NAME)] = shadowpod("1")
        enforcer = ShadowPodEnforcer(api, Metrics(), consumers())  # type: ignore[arg-type]
        enforcer.on_shadowpod_event("ADDED", shadowpod("1"))  # its pod is not listed yet
        for _ in range(10):
            await asyncio.sleep(0)
        assert api.calls == []
        enforcer.on_pod_event("ADDED", running_pod(shadowpod("1")))
        enforcer.listed.set()
        await settled(enforcer)
        assert ("create", pod_path(NAMESPACE)) not in api.calls  # the pod was there
        assert ("patch", shadowpod_path(NAMESPACE, NAME, "status")) in api.calls
    run(scenario)


def test_a_status_refused_as_outdated_is_written_again_over_the_next_version() -> None:
    async def scenario() -> None:
        api = FakeApi()
        api.conflicts = 1
        enforcer = enforcer_with(api)
        enforcer.on_shadowpod_event("ADDED", shadowpod("1"))
        enforcer.on_pod_event("ADDED", running_pod(shadowpod("1")))
        await settled(enforcer)
        status_writes = [c for c in api.calls if c == ("patch", shadowpod_path(
            NAMESPACE, NAME, "status"))]
        assert len(status_writes) == 1  # refused: the cache's version was outdated

        # The newer version changes nothing the pod follows (another status write), and is
        # still reconciled: the status was never written.
        enforcer.on_shadowpod_event("MODIFIED", shadowpod("2", phase="Pending"))
        await settled(enforcer)
        status_writes = [c for c in api.calls if c == ("patch", shadowpod_path(
            NAMESPACE, NAME, "status"))]
        assert len(status_writes) == 2

        # Converged: a status-only event of the written version reconciles nothing.
        before = len(api.calls)
        enforcer.on_shadowpod_event("MODIFIED", shadowpod("3", phase="Running"))
        await settled(enforcer)
        assert len(api.calls) == before
    run(scenario)


def test_events_for_a_key_being_reconciled_make_one_more_run() -> None:
    async def scenario() -> None:
        runs: list[str] = []
        release = asyncio.Event()

        async def reconcile(key: str) -> None:
            runs.append(key)
            await release.wait()

        runner = KeyedRunner(reconcile, workers=1)
        runner.trigger("a")
        await asyncio.sleep(0)
        for _ in range(5):
            runner.trigger("a")  # coalesce into one more run
        runner.trigger("b")  # waits for the single worker
        release.set()
        while len(runner):
            await asyncio.sleep(0)
        assert runs == ["a", "b", "a"] or runs == ["a", "a", "b"]
    run(scenario)


def test_a_failed_key_comes_back_after_a_backoff() -> None:
    async def scenario() -> None:
        attempts: list[float] = []  # when each attempt ran
        done = asyncio.Event()

        async def reconcile(key: str) -> None:
            attempts.append(asyncio.get_running_loop().time())
            if len(attempts) < 3:
                raise RuntimeError("not yet")
            done.set()

        runner = KeyedRunner(reconcile, base_delay=0.01)
        runner.trigger("a")
        await done.wait()
        assert len(attempts) == 3
    run(scenario)


def test_pods_are_made_only_in_twin_namespaces_of_ours_and_within_the_pod_policy() -> None:
    """Admission checks the same, but the enforcer may create pods anywhere: it checks again,
    for a webhook that was bypassed or a policy tightened after admission."""
    privileged = shadowpod("1")
    privileged["spec"]["pod"]["containers"][0]["securityContext"] = {"privileged": True}
    elsewhere = copy.deepcopy(shadowpod("1"))
    elsewhere["metadata"]["namespace"] = "kube-system"
    for refused in (privileged, elsewhere):
        async def scenario(body: dict[str, Any] = refused) -> None:
            api = FakeApi()
            meta = body["metadata"]
            api.objects[shadowpod_path(meta["namespace"], NAME)] = body
            enforcer = enforcer_with(api)
            enforcer.on_shadowpod_event("ADDED", body)
            await settled(enforcer)
            assert ("create", pod_path(meta["namespace"])) not in api.calls
            assert ("create", "/api/v1/namespaces/" + meta["namespace"] + "/events") in api.calls
            # recorded for the home pod to show (condition PodCreated False)
            assert ("patch", shadowpod_path(meta["namespace"], NAME, "status")) in api.calls
        run(scenario)
