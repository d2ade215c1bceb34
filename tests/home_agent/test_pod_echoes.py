"""The pod offloader's own writes and their watch echoes, one reconcile at a time against
fakes of both API servers: the echo of a ShadowPod it created or of a status it wrote queues
nothing (its reconcile would read what the write decided on), anything else does (someone
else's change, a relist, a write whose answer differs from what was sent)."""

from __future__ import annotations

import asyncio
import copy
import itertools
from typing import Any

from annex.api_errors import ApiError
from home_agent.agent import HOME, REMOTE, Agent, pod_key
from home_agent.assembly import agent_routes, pod_offloader
from home_agent.pod import PodOffloader
from home_agent.routes import declare_agent
from tests.home_agent.test_pod_offloading import running_status
from tests.home_agent.test_reflection import FakeApi, agent_with, queued_keys

TWIN = "app-home-1"
KEY = pod_key("app", "web")


class StampingApi(FakeApi):
    """`FakeApi` answering writes with a new resourceVersion, as an API server does."""

    def __init__(self) -> None:
        super().__init__()
        self.versions = itertools.count(100)
        self.answer_differs = False

    def _stamped(self, body: dict[str, Any]) -> dict[str, Any]:
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(next(self.versions))
        stored["metadata"].setdefault("uid", "uid-shadow")
        if self.answer_differs:
            stored["status"] = {**(stored.get("status") or {}), "message": "defaulted"}
        return stored

    async def create(self, path: str, body: dict[str, Any]) -> Any:
        return copy.deepcopy(await super().create(path, self._stamped(body)))

    async def replace(self, path: str, body: dict[str, Any]) -> Any:
        return copy.deepcopy(await super().replace(path, self._stamped(body)))

    async def find(self, path: str) -> dict[str, Any] | None:
        found = self.objects.get(path)
        return copy.deepcopy(found) if found is not None else None


def _offloaded() -> tuple[Agent, PodOffloader, StampingApi, StampingApi]:
    remote, home = StampingApi(), StampingApi()
    agent = agent_with(remote, home)
    declare_agent(agent_routes(agent))
    return agent, pod_offloader(agent), remote, home


def _pod() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "app", "uid": "uid-web",
                         "resourceVersion": "1"},
            "spec": {"nodeName": "liqo-remote", "containers": [{"name": "main",
                                                                "image": "nginx:1"}]}}


def _reconcile(pods: PodOffloader) -> None:
    asyncio.run(pods.reconcile("app", "web"))


def _shadow(remote: StampingApi) -> dict[str, Any]:
    return next(obj for path, obj in remote.objects.items() if "/shadowpods/" in path)


def _pod_written(home: StampingApi) -> dict[str, Any]:
    return next(obj for path, obj in home.objects.items() if path.endswith("/status"))


def test_the_echoes_of_our_shadowpod_creation_and_status_write_queue_nothing() -> None:
    agent, pods, remote, home = _offloaded()
    agent.informers.dispatch(HOME, "pods", "ADDED", _pod())
    assert queued_keys(agent) == [KEY]
    _reconcile(pods)  # creates the ShadowPod
    agent.informers.dispatch(REMOTE, "shadowpods", "ADDED", _shadow(remote))
    assert queued_keys(agent) == []

    shadow = {**_shadow(remote), "status": running_status("10.200.0.5")}
    shadow["metadata"] = {**shadow["metadata"], "resourceVersion": "200"}
    agent.informers.dispatch(REMOTE, "shadowpods", "MODIFIED", shadow)  # the enforcer's
    assert queued_keys(agent) == [KEY]
    _reconcile(pods)  # writes the pod's status
    agent.informers.dispatch(HOME, "pods", "MODIFIED", _pod_written(home))
    assert queued_keys(agent) == []
    agent.informers.dispatch(HOME, "pods", "ADDED", _pod_written(home))  # a relist
    assert queued_keys(agent) == [KEY]


def test_an_echo_that_comes_before_the_answer_or_after_another_change_is_looked_at() -> None:
    agent, pods, remote, home = _offloaded()
    agent.informers.dispatch(HOME, "pods", "ADDED", _pod())
    queued_keys(agent)
    create = remote.create

    async def echoing_before_answering(path: str, body: dict[str, Any]) -> Any:
        answer = await create(path, body)
        agent.informers.dispatch(REMOTE, "shadowpods", "ADDED", answer)
        return answer

    remote.create = echoing_before_answering  # type: ignore[method-assign]
    _reconcile(pods)
    assert queued_keys(agent) == [KEY]  # the echo, while the write was in flight

    shadow = {**_shadow(remote), "status": running_status("10.200.0.5")}
    shadow["metadata"] = {**shadow["metadata"], "resourceVersion": "200"}
    agent.informers.dispatch(REMOTE, "shadowpods", "MODIFIED", shadow)  # the enforcer's
    assert queued_keys(agent) == [KEY]
    home.answer_differs = True  # the server stored a status other than the one sent
    _reconcile(pods)
    agent.informers.dispatch(HOME, "pods", "MODIFIED", _pod_written(home))
    assert queued_keys(agent) == [KEY]


def test_a_shadowpods_news_goes_before_pods_still_to_offload() -> None:
    """A burst of new pods does not hold back the status of a pod already offloaded."""
    agent, pods, remote, _ = _offloaded()
    agent.informers.dispatch(HOME, "pods", "ADDED", _pod())
    queued_keys(agent)
    _reconcile(pods)  # creates the ShadowPod
    for index in range(3):
        new = _pod()
        new["metadata"] = {**new["metadata"], "name": f"new-{index}", "uid": f"uid-{index}"}
        agent.informers.dispatch(HOME, "pods", "ADDED", new)
    shadow = {**_shadow(remote), "status": running_status("10.200.0.5")}
    shadow["metadata"] = {**shadow["metadata"], "resourceVersion": "200"}
    agent.informers.dispatch(REMOTE, "shadowpods", "MODIFIED", shadow)  # the enforcer's
    assert queued_keys(agent) == [KEY, *(pod_key("app", f"new-{index}") for index in range(3))]


def test_a_creation_answered_409_that_made_nothing_is_retried() -> None:
    """kube-apiserver's quota admission answers 409 (a Conflict on the namespace's
    ResourceQuota) when its write of the quota loses a race with another admission: nothing is
    stored, and the pod is looked at again, as after any refusal, until its ShadowPod is made."""
    agent, pods, remote, _ = _offloaded()
    agent.informers.dispatch(HOME, "pods", "ADDED", _pod())
    queued_keys(agent)
    create = remote.create
    refusals = [ApiError(409, {"reason": "Conflict", "message": (
        'Operation cannot be fulfilled on resourcequotas "annex-consumer": the object has been '
        "modified; please apply your changes to the latest version and try again")})]

    async def conflicting(path: str, body: dict[str, Any]) -> Any:
        if "/shadowpods" in path and refusals:
            raise refusals.pop()
        return await create(path, body)

    remote.create = conflicting  # type: ignore[method-assign]
    assert asyncio.run(pods.reconcile("app", "web")).retry
    assert not [path for path in remote.objects if "/shadowpods/" in path]
    assert not asyncio.run(pods.reconcile("app", "web")).retry
    assert _shadow(remote)["metadata"]["name"] == "web"
