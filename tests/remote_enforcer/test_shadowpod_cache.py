"""The enforcer decides from its watch caches, which may lag the API server: what guards each
write it makes from them."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from annex.api_errors import ApiError
from annex.informers import Informers
from remote_enforcer.metrics import Metrics
from remote_enforcer.operator import build
from remote_enforcer.routes import CLUSTER
from remote_enforcer.settings import parse
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


def running_pod(owner: dict[str, Any]) -> dict[str, Any]:
    pod = enforcement.desired_pod(owner)
    pod["metadata"].update(resourceVersion="7", uid="pod-uid")
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


TWIN = {"metadata": {"name": NAMESPACE, "labels": ownership_labels("home", "provider")}}
"""Consumer home's twin namespace."""


class Wired:
    """The enforcer's parts as it wires them (`remote_enforcer.operator.build`), fed as its
    watches feed them: into the registry's mirrors and routes."""

    def __init__(self, api: FakeApi) -> None:
        informers = Informers()
        self.parts = build(api, parse(["--cluster-id", "provider"]),  # type: ignore[arg-type]
                           informers, Metrics())
        self.enforcer = self.parts.shadowpods
        self.feed = functools.partial(informers.dispatch, CLUSTER)
        """feed(resource, event type, object): one watch event."""
        self.feed("namespaces", "ADDED", copy.deepcopy(TWIN))


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 10))


async def until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.005)


async def settled(enforcer: ShadowPodEnforcer) -> None:
    """Every key reconciled, none waiting (nor parked, nor backing off)."""
    await until(lambda: len(enforcer.controller) == 0)


@contextlib.asynccontextmanager
async def running(api: FakeApi, listed: bool = True) -> AsyncIterator[Wired]:
    """The ShadowPod controller running; its caches listed unless `listed` is False."""
    wired = Wired(api)
    if listed:
        wired.enforcer.listed.set()
    task = asyncio.create_task(wired.enforcer.controller.run())
    try:
        yield wired
    finally:
        wired.enforcer.controller.stop()
        await task


def test_a_first_pod_is_made_from_the_cache_without_reading_its_shadowpod() -> None:
    async def scenario() -> None:
        api = FakeApi()
        async with running(api) as wired:
            wired.feed("shadowpods", "ADDED", shadowpod("1"))
            await settled(wired.enforcer)
            # Had the ShadowPod gone meanwhile, its uid in the pod's controller reference would
            # have the garbage collector remove the pod.
            assert api.calls == [("create", pod_path(NAMESPACE))]
    run(scenario)


def test_a_pod_seen_gone_is_made_again_only_after_its_shadowpod_is_read_live() -> None:
    async def scenario() -> None:
        api = FakeApi()
        async with running(api) as wired:
            wired.feed("shadowpods", "ADDED", shadowpod("1"))
            wired.feed("pods", "ADDED", running_pod(shadowpod("1")))
            await settled(wired.enforcer)
            api.calls.clear()
            # The pod's deletion came first: the cache still holds a ShadowPod the API server
            # no longer has (its pod collected with it).
            wired.feed("pods", "DELETED", running_pod(shadowpod("1")))
            await settled(wired.enforcer)
            assert ("get", shadowpod_path(NAMESPACE, NAME)) in api.calls
            assert not [call for call in api.calls if call[0] == "create"]

            api.objects[shadowpod_path(NAMESPACE, NAME)] = shadowpod("2")
            wired.feed("shadowpods", "MODIFIED", {**shadowpod("2"), "metadata": {
                **shadowpod("2")["metadata"], "labels": {ORIGIN_CLUSTER_LABEL: "home",
                                                         "v": "2"}}})
            await settled(wired.enforcer)
            assert ("create", pod_path(NAMESPACE)) in api.calls
    run(scenario)


def test_a_shadowpod_whose_status_reports_a_pod_is_read_live_before_its_pod_is_made() -> None:
    async def scenario() -> None:
        api = FakeApi()
        async with running(api) as wired:
            # A restarted enforcer: its listings show a ShadowPod that had a pod, and no pod.
            wired.feed("shadowpods", "ADDED", shadowpod("1", phase="Running"))
            await settled(wired.enforcer)
            assert api.calls == [("get", shadowpod_path(NAMESPACE, NAME))]
    run(scenario)


def test_nothing_is_decided_before_both_caches_are_listed() -> None:
    async def scenario() -> None:
        api = FakeApi()
        api.objects[shadowpod_path(NAMESPACE, NAME)] = shadowpod("1")
        async with running(api, listed=False) as wired:
            wired.feed("shadowpods", "ADDED", shadowpod("1"))  # its pod is not listed yet
            for _ in range(10):  # the workers run, look, and take nothing
                await asyncio.sleep(0)
            assert wired.enforcer.controller.queue.pending()  # waiting in the queue, untouched
            assert api.calls == [] and len(wired.enforcer.controller) == 1
            wired.feed("pods", "ADDED", running_pod(shadowpod("1")))
            wired.enforcer.listed.set()
            await settled(wired.enforcer)
            assert ("create", pod_path(NAMESPACE)) not in api.calls  # the pod was there
            assert ("patch", shadowpod_path(NAMESPACE, NAME, "status")) in api.calls
    run(scenario)


def test_a_status_refused_as_outdated_is_written_again_over_the_next_version() -> None:
    async def scenario() -> None:
        api = FakeApi()
        api.conflicts = 1
        status_write = ("patch", shadowpod_path(NAMESPACE, NAME, "status"))
        async with running(api) as wired:
            wired.feed("shadowpods", "ADDED", shadowpod("1"))
            wired.feed("pods", "ADDED", running_pod(shadowpod("1")))
            await settled(wired.enforcer)
            # refused: the cache's version was outdated
            assert api.calls.count(status_write) == 1

            # The newer version changes nothing the pod follows (another status write), and is
            # still reconciled: the status was never written.
            wired.feed("shadowpods", "MODIFIED", shadowpod("2", phase="Pending"))
            await settled(wired.enforcer)
            assert api.calls.count(status_write) == 2

            # Converged: a status-only event of the written version reconciles nothing.
            before = len(api.calls)
            wired.feed("shadowpods", "MODIFIED", shadowpod("3", phase="Running"))
            await settled(wired.enforcer)
            assert len(api.calls) == before
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
            async with running(api) as wired:
                wired.feed("shadowpods", "ADDED", body)
                # refused, and tried again after a backoff
                await until(lambda: wired.enforcer.controller.outcomes().get("refused") == 1)
                assert wired.enforcer.controller.queue.timers() == 1
            assert ("create", pod_path(meta["namespace"])) not in api.calls
            assert ("create", "/api/v1/namespaces/" + meta["namespace"] + "/events") in api.calls
            # recorded for the home pod to show (condition PodCreated False)
            assert ("patch", shadowpod_path(meta["namespace"], NAME, "status")) in api.calls
        run(scenario)
