"""A pod the API server refused is made as soon as what refused it may have changed: a loosened
policy reaches the twin namespace's Pod Security labels a moment after the consumer may offload
under it, and the API server judges a pod by the labels it reads when the pod is created. The
enforcer tries a refused pod again at once when its namespace or its consumer's Quota changes,
not only after its backoff (here a minute, to tell them apart)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from annex.api_errors import ApiError
from annex.workqueue import KeyQueue
from remote_enforcer.shadowpods import pod_path
from shared.ownership import ownership_labels
from tests.remote_enforcer.test_shadowpod_cache import (
    NAMESPACE,
    FakeApi,
    Wired,
    run,
    shadowpod,
    until,
)

FORBIDDEN = {"kind": "Status", "reason": "Forbidden", "message": (
    'pods "web" is forbidden: violates PodSecurity "baseline:latest": privileged (container '
    '"main" must not set securityContext.privileged=true)')}


class RefusingApi(FakeApi):
    """Refuses pod creations (Pod Security) while `refusing`."""

    def __init__(self) -> None:
        super().__init__()
        self.refusing = True

    async def create(self, path: str, body: dict[str, Any]) -> Any:
        await super().create(path, body)
        if self.refusing:
            raise ApiError(403, FORBIDDEN)
        return body


def creations(api: FakeApi) -> int:
    return api.calls.count(("create", pod_path(NAMESPACE)))


@contextlib.asynccontextmanager
async def refused_once(api: RefusingApi) -> AsyncIterator[Wired]:
    """An enforcer whose first try at the pod was refused; the next try is a minute away."""
    wired = Wired(api)
    enforcer = wired.enforcer
    enforcer.controller.queue = KeyQueue(base_delay=60)
    enforcer.listed.set()
    task = asyncio.create_task(enforcer.controller.run())
    try:
        wired.feed("shadowpods", "ADDED", shadowpod("1"))
        # refused, and the refusal recorded on the ShadowPod
        await until(lambda: creations(api) == 1 and any(
            call == "patch" and path.endswith("/status") for call, path in api.calls))
        api.refusing = False
        yield wired
    finally:
        enforcer.controller.stop()
        await task


def twin_namespace(level: str) -> dict[str, Any]:
    return {"metadata": {"name": NAMESPACE, "labels": {
        **ownership_labels("home", "provider"), "pod-security.kubernetes.io/enforce": level}}}


def test_a_refused_pod_is_made_at_once_when_its_namespace_changes() -> None:
    async def scenario() -> None:
        api = RefusingApi()
        async with refused_once(api) as wired:
            wired.feed("namespaces", "MODIFIED", twin_namespace("privileged"))
            await until(lambda: creations(api) == 2)
    run(scenario)


def test_a_refused_pod_is_made_at_once_when_its_consumers_quota_changes() -> None:
    async def scenario() -> None:
        api = RefusingApi()
        async with refused_once(api) as wired:
            wired.feed("quotas", "MODIFIED", {"metadata": {"name": "home"}, "spec": {
                "consumerClusterId": "home", "podPolicy": {"podSecurity": "privileged"}}})
            await until(lambda: creations(api) == 2)
    run(scenario)


def test_other_namespaces_and_pods_made_since_are_left_to_their_backoff() -> None:
    async def scenario() -> None:
        api = RefusingApi()
        async with refused_once(api) as wired:
            other = twin_namespace("privileged")
            other["metadata"]["name"] = "elsewhere"
            wired.feed("namespaces", "MODIFIED", other)
            wired.feed("namespaces", "DELETED", twin_namespace("privileged"))
            # nothing to take before the minute
            assert not wired.enforcer.controller.queue.pending()
            wired.feed("namespaces", "MODIFIED", twin_namespace("privileged"))
            assert wired.enforcer.controller.queue.pending()
            await until(lambda: creations(api) == 2 and len(wired.enforcer.controller) == 1)
            wired.feed("namespaces", "MODIFIED", twin_namespace("privileged"))
            assert not wired.enforcer.controller.queue.pending()  # made: no longer refused
    run(scenario)
