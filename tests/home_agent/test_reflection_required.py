"""A pod's ShadowPod waits for the remote copies of the ConfigMaps and Secrets it needs to start
(`home_agent.reflection.required`), one reconcile at a time against recording fakes (the watches
are played by feeding the informers)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import pytest

from annex.controller import Result
from home_agent.agent import HOME as HOME_SIDE
from home_agent.agent import REMOTE as REMOTE_SIDE
from home_agent.agent import Agent, pod_key
from home_agent.assembly import agent_routes, pod_offloader, reflection_for
from home_agent.config import parse_config
from home_agent.pod import PodOffloader
from home_agent.reflection.kinds import KINDS
from home_agent.reflection.manager import Reflection
from home_agent.routes import declare_agent, declare_reflection
from shared.forge.pod_plan import COPY_WAIT
from shared.wellknown import SKIP_REFLECTION_ANNOTATION
from tests.home_agent.test_reflection import agent_with, listed, queued_keys
from tests.home_agent.test_reflection_token import (
    HOME,
    NODE,
    OURS,
    REMOTE,
    TWIN,
    FakeHome,
    FakeRemote,
)

SHADOW_POD = f"/apis/offloading.liqo.io/v1beta1/namespaces/{TWIN}/shadowpods/web"


def _offloading(*flags: str, clock: Callable[[], float] | None = None
                ) -> tuple[Agent, PodOffloader, Reflection, FakeRemote]:
    """The agent's pods and its reflection, routes declared as the runner does; the token
    reflection off (its own wait: tests/home_agent/test_reflection_token.py)."""
    remote = FakeRemote()
    agent: Agent = agent_with(remote, FakeHome())
    agent.config = parse_config(["--remote-kubeconfig", "unused", "--cluster-id", HOME,
                                 "--remote-cluster-id", REMOTE,
                                 "--serviceaccount-reflection-workers", "0", *flags])
    reflection = reflection_for(agent, KINDS)
    declare_agent(agent_routes(agent))
    declare_reflection(agent_routes(agent), reflection)
    listed(agent)
    pods = pod_offloader(agent, reflection)
    if clock is not None:
        pods.sources = dataclasses.replace(pods.sources, clock=clock)
    return agent, pods, reflection, remote


def _pod(*volumes: dict[str, Any], **container: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "app", "uid": "uid-web",
                         "resourceVersion": "1"},
            "spec": {"nodeName": NODE,
                     "containers": [{"name": "app", "image": "nginx", **container}],
                     "volumes": list(volumes)}}


ROOT_CA = {"name": "kube-api-access-x7k2p", "projected": {"sources": [
    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
        "fieldPath": "metadata.namespace"}}]}}]}}
SETTINGS = {"name": "settings", "configMap": {"name": "settings"}}
TLS = {"name": "tls", "secret": {"secretName": "web-tls"}}


def _home(plural: str, name: str, annotations: dict[str, str] | None = None,
          agent: Agent | None = None) -> dict[str, Any]:
    obj = {"metadata": {"namespace": "app", "name": name, "annotations": annotations or {}},
           "data": {"key": "value"}}
    if agent is not None:
        agent.informers.dispatch(HOME_SIDE, plural, "ADDED", obj)
    return obj


def _copy(agent: Agent, plural: str, name: str, labels: dict[str, str] | None = None,
          changed: bool = False) -> None:
    """The remote watch shows a copy (ours, unless `labels` say otherwise), or, `changed`, a
    change of it."""
    agent.informers.dispatch(REMOTE_SIDE, plural, "MODIFIED" if changed else "ADDED", {
        "metadata": {"namespace": TWIN, "name": name, "labels": OURS if labels is None else labels,
                     "resourceVersion": "8" if changed else "7"},
        "data": {"key": "changed" if changed else "value"}})


def _reconcile(pods: PodOffloader) -> Result:
    async def run() -> Result:
        return await pods.reconcile("app", "web")
    return asyncio.run(run())


def test_a_shadowpod_waits_for_the_copies_its_volumes_mount_and_is_made_once_they_came() -> None:
    """A remote pod made first would sit in ContainerCreating (FailedMount) until the
    kubelet's next mount try; each copy's event brings the pod back, ahead of pods not looked
    at yet."""
    agent, pods, reflection, remote = _offloading()
    for plural, name in (("configmaps", "kube-root-ca.crt"), ("configmaps", "settings"),
                         ("secrets", "web-tls")):
        _home(plural, name, agent=agent)
    agent.informers.dispatch(HOME_SIDE, "pods", "ADDED", _pod(ROOT_CA, SETTINGS, TLS))
    assert queued_keys(agent) == [pod_key("app", "web")]

    result = _reconcile(pods)
    assert SHADOW_POD not in remote.objects
    assert result.requeue_after is not None and 0 < result.requeue_after <= COPY_WAIT
    _copy(agent, "configmaps", "kube-root-ca.crt.annex")  # the root CA's copy, renamed
    agent.queue.add(pod_key("app", "other"))  # a pod not looked at yet
    assert queued_keys(agent) == [pod_key("app", "web"), pod_key("app", "other")]
    _reconcile(pods)
    assert SHADOW_POD not in remote.objects  # two copies still to come
    _copy(agent, "configmaps", "settings")
    _copy(agent, "secrets", "web-tls")
    assert queued_keys(agent) == [pod_key("app", "web")]
    assert _reconcile(pods).requeue_after is None
    assert SHADOW_POD in remote.objects
    # its wait is over: the copies it waited for bring it back no more when they change
    queued_keys(agent)
    for plural, name in (("configmaps", "kube-root-ca.crt.annex"), ("configmaps", "settings"),
                         ("secrets", "web-tls")):
        _copy(agent, plural, name, changed=True)
    assert queued_keys(agent) == []


def test_a_shadowpod_waits_for_the_copies_its_environment_reads() -> None:
    """A remote pod made first would wait in CreateContainerConfigError for the pod's next sync
    (10 to 15 s on a kubelet)."""
    agent, pods, _, remote = _offloading()
    _home("configmaps", "settings", agent=agent)
    _home("secrets", "credentials", agent=agent)
    agent.informers.dispatch(HOME_SIDE, "pods", "ADDED", _pod(
        env=[{"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings",
                                                                "key": "mode"}}}],
        envFrom=[{"secretRef": {"name": "credentials"}}]))
    queued_keys(agent)
    assert _reconcile(pods).requeue_after is not None
    _copy(agent, "configmaps", "settings")
    assert queued_keys(agent) == [pod_key("app", "web")]
    assert _reconcile(pods).requeue_after is not None  # the Secret's copy still to come
    assert SHADOW_POD not in remote.objects
    _copy(agent, "secrets", "credentials")
    assert queued_keys(agent) == [pod_key("app", "web")]
    assert _reconcile(pods).requeue_after is None
    assert SHADOW_POD in remote.objects


@pytest.mark.parametrize("case", [
    "missing at home", "optional", "kind not reflected", "skipped by annotation",
    "foreign object of that name", "copy already there"])
def test_a_shadowpod_is_made_at_once_when_no_copy_is_to_come(case: str) -> None:
    """The wait is only for copies the agent is about to make: what a home kubelet would not
    find either, what the pod does without, and what the remote already has are not."""
    flags = ["--configmap-reflection-workers", "0"] if case == "kind not reflected" else []
    agent, pods, _, remote = _offloading(*flags)
    volume: dict[str, Any] = SETTINGS
    if case != "missing at home":
        skip = {SKIP_REFLECTION_ANNOTATION: "true"} if case == "skipped by annotation" else None
        _home("configmaps", "settings", skip, agent=agent)
    if case == "optional":
        volume = {"name": "settings", "configMap": {"name": "settings", "optional": True}}
    if case == "foreign object of that name":
        _copy(agent, "configmaps", "settings", labels={})
    if case == "copy already there":
        _copy(agent, "configmaps", "settings")
    agent.informers.dispatch(HOME_SIDE, "pods", "ADDED", _pod(volume))
    assert _reconcile(pods).requeue_after is None
    assert SHADOW_POD in remote.objects


def test_a_copy_that_does_not_come_is_waited_for_a_while_then_the_pod_is_offloaded(
        caplog: pytest.LogCaptureFixture) -> None:
    """The remote cluster may refuse the copy (a quota on ConfigMaps); its reflector reports
    that on the ConfigMap. The pod is offloaded after `COPY_WAIT`: the remote kubelet's
    FailedMount warnings then say what is missing."""
    now = [1000.0]
    agent, pods, _, remote = _offloading(clock=lambda: now[0])
    _home("configmaps", "settings", agent=agent)
    agent.informers.dispatch(HOME_SIDE, "pods", "ADDED", _pod(SETTINGS))
    first = _reconcile(pods).requeue_after
    now[0] += 10
    assert first == COPY_WAIT and _reconcile(pods).requeue_after == COPY_WAIT - 10
    assert SHADOW_POD not in remote.objects
    now[0] += COPY_WAIT - 10
    with caplog.at_level(logging.WARNING):
        assert _reconcile(pods).requeue_after is None
    assert SHADOW_POD in remote.objects
    assert "app/web offloaded without the copies it needs" in caplog.text
    assert "configmaps settings" in caplog.text
    queued_keys(agent)
    _copy(agent, "configmaps", "settings")  # late: the pod waits for it no more
    assert queued_keys(agent) == []


def test_a_pod_deleted_while_waiting_is_forgotten_and_its_copy_queues_nothing() -> None:
    agent, pods, reflection, _ = _offloading()
    _home("configmaps", "settings", agent=agent)
    agent.informers.dispatch(HOME_SIDE, "pods", "ADDED", _pod(SETTINGS))
    _reconcile(pods)
    agent.informers.dispatch(HOME_SIDE, "pods", "DELETED", _pod(SETTINGS))
    queued_keys(agent)
    _reconcile(pods)
    _copy(agent, "configmaps", "settings")
    assert queued_keys(agent) == []
