"""The offloader's status writes to a home API server that drops status.hostIPs, as
kube-apiserver before 1.28 does (the field is not in its schema): after the first write's
answer shows it, reconciles of an unchanged remote status write nothing, where each used to
write the status again. One reconcile at a time against fakes of both API servers (kubesim
keeps hostIPs, as the release it imitates does)."""

from __future__ import annotations

from typing import Any

from home_agent.agent import HOME, REMOTE
from tests.home_agent.test_pod_echoes import _offloaded, _pod, _pod_written, _reconcile, _shadow
from tests.home_agent.test_pod_offloading import running_status


def test_an_unchanged_status_is_not_written_again_to_a_server_that_drops_host_ips() -> None:
    agent, pods, remote, home = _offloaded()
    replace = home.replace

    async def dropping_host_ips(path: str, body: dict[str, Any]) -> Any:
        if path.endswith("/status"):
            body = {**body, "status": {k: v for k, v in body["status"].items()
                                       if k != "hostIPs"}}
        return await replace(path, body)

    home.replace = dropping_host_ips  # type: ignore[method-assign]
    agent.informers.dispatch(HOME, "pods", "ADDED", _pod())
    _reconcile(pods)  # creates the ShadowPod
    shadow = {**_shadow(remote), "status": running_status("10.200.0.5")}
    shadow["metadata"] = {**shadow["metadata"], "resourceVersion": "200"}
    agent.informers.dispatch(REMOTE, "shadowpods", "ADDED", shadow)

    def status_writes() -> int:
        return sum(1 for verb, path in home.writes()
                   if verb == "replace" and path.endswith("/status"))

    _reconcile(pods)  # the first status write, answered without hostIPs
    assert status_writes() == 1
    written = _pod_written(home)
    assert "hostIPs" not in written["status"] and written["status"]["hostIP"]
    for _ in range(3):  # resyncs: the informer holds what the server stored
        agent.informers.dispatch(HOME, "pods", "MODIFIED", _pod_written(home))
        _reconcile(pods)
    assert status_writes() == 1

    changed = {**shadow, "status": running_status("10.200.0.6")}
    changed["metadata"] = {**shadow["metadata"], "resourceVersion": "201"}
    agent.informers.dispatch(REMOTE, "shadowpods", "MODIFIED", changed)
    _reconcile(pods)  # a change the server keeps is still written
    assert status_writes() == 2
    assert _pod_written(home)["status"]["podIP"] != written["status"]["podIP"]
