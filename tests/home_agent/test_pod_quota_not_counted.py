"""A ShadowPod creation refused because the provider's quota does not count ShadowPods yet
(kube-apiserver's "status unknown for quota", for a while after the CRD is installed): the home
pod's RemoteCreationFailed condition and Event say that it passes, with their own reason, and
the creation is retried; once the quota counts ShadowPods the pod is offloaded. One reconcile
at a time against fakes of both API servers (kubesim's quota counts a kind at once)."""

from __future__ import annotations

import asyncio
from typing import Any

from annex.api_errors import ApiError
from annex.controller import RETRY
from home_agent.agent import HOME
from shared.forge.pod_status import QUOTA_NOT_COUNTED_REASON, shadow_pod_refusal
from shared.wellknown import REMOTE_CREATION_FAILED_CONDITION
from tests.home_agent.test_pod_echoes import _offloaded, _pod, _pod_written, _shadow

# kube-apiserver's answer (staging/.../admission/plugin/resourcequota/controller.go)
REFUSAL = ('shadowpods.offloading.liqo.io "web" is forbidden: status unknown for quota: '
           'annex-consumer, resources: count/shadowpods.offloading.liqo.io')


def _status_unknown() -> ApiError:
    return ApiError(403, {"kind": "Status", "status": "Failure", "message": REFUSAL,
                          "reason": "Forbidden", "code": 403})


def test_other_refusals_read_as_the_api_server_said() -> None:
    message = 'shadowpods.offloading.liqo.io "web" is forbidden: exceeded quota: annex-consumer'
    assert shadow_pod_refusal("Forbidden", message) == ("Forbidden", message)


def test_a_quota_not_counting_shadowpods_yet_is_reported_as_passing_and_retried() -> None:
    agent, pods, remote, home = _offloaded()
    create = remote.create
    refusing = [True]

    async def quota_not_counted_yet(path: str, body: dict[str, Any]) -> Any:
        if refusing[0]:
            remote.calls.append(("create", path))
            raise _status_unknown()
        return await create(path, body)

    remote.create = quota_not_counted_yet  # type: ignore[method-assign]
    agent.informers.dispatch(HOME, "pods", "ADDED", _pod())
    assert asyncio.run(pods.reconcile("app", "web")) == RETRY

    conditions = _pod_written(home)["status"]["conditions"]
    condition = next(c for c in conditions if c["type"] == REMOTE_CREATION_FAILED_CONDITION)
    assert condition["reason"] == QUOTA_NOT_COUNTED_REASON
    assert "clears by itself" in condition["message"] and REFUSAL in condition["message"]
    events = [obj for path, obj in home.objects.items() if "/events/" in path]
    assert [(e["reason"], e["message"]) for e in events] == [
        (REMOTE_CREATION_FAILED_CONDITION, condition["message"])]

    refusing[0] = False  # the quota controller has counted ShadowPods
    agent.informers.dispatch(HOME, "pods", "MODIFIED", _pod_written(home))
    asyncio.run(pods.reconcile("app", "web"))
    assert _shadow(remote)["metadata"]["name"] == "web"
