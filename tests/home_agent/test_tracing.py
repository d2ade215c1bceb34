"""A pod's path home → remote → home is one trace: the agent's reconciles of a pod continue the
traceparent on its ShadowPod (the one the agent wrote, which the provider's reconcile continued),
so the status it brings home joins the trace that made the remote pod."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, cast

from annex import tracing
from annex.controller import Controller
from annex.mirror import Mirror
from home_agent.runner import pod_traceparent
from home_agent.twins import TwinNamespaces
from shared.wellknown import TRACEPARENT_ANNOTATION
from tests.annex.test_tracing import _by_name, _enforcer_reconciles
from tests.remote_enforcer.test_shadowpod_cache import NAME, NAMESPACE, shadowpod

HOME_NAMESPACE = "web"


@dataclass
class ShadowPods:
    """The agent's mirror of the provider's ShadowPods, by (namespace, name)."""

    objects: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def get(self, key: tuple[str, str]) -> dict[str, Any] | None:
        return self.objects.get(key)


class Twins:
    def mapped(self, namespace: str) -> str | None:
        return NAMESPACE if namespace == HOME_NAMESPACE else None


def traceparent(shadow_pods: ShadowPods, key: tuple[str, ...]) -> object:
    """`pod_traceparent` over the twin of HOME_NAMESPACE and `shadow_pods`."""
    return pod_traceparent(cast(TwinNamespaces, Twins()), cast(Mirror, shadow_pods), key)


def test_the_status_brought_home_continues_the_trace_that_made_the_remote_pod() -> None:
    shadow_pods = ShadowPods()
    reconciles: list[str] = []

    async def agent_reconcile(key: tuple[str, str, str]) -> None:
        if not reconciles:  # the creation: the ShadowPod written with this span's traceparent
            shadow_pods.objects[(NAMESPACE, NAME)] = tracing.with_traceparent(
                shadowpod("1"))
        reconciles.append(key[2])

    with tracing.spans_in_memory() as exporter:
        controller = Controller("agent", agent_reconcile, workers=1,
                                traceparent=lambda key: traceparent(shadow_pods, key))
        key = ("pod", HOME_NAMESPACE, NAME)
        asyncio.run(controller.process(key))
        _enforcer_reconciles(shadow_pods.objects[(NAMESPACE, NAME)])
        asyncio.run(controller.process(key))  # the remote status brought home
    creation, relay = _by_name(exporter.get_finished_spans(), "reconcile agent")
    [enforcer] = _by_name(exporter.get_finished_spans(), "reconcile shadowpods")
    assert creation.parent is None
    assert enforcer.context.trace_id == relay.context.trace_id == creation.context.trace_id
    assert relay.parent.span_id == creation.context.span_id


def test_a_pod_key_without_a_shadowpod_or_twin_starts_its_own_trace() -> None:
    assert traceparent(ShadowPods(), ("pod", HOME_NAMESPACE, NAME)) is None
    assert traceparent(ShadowPods(), ("pod", "not-offloaded", NAME)) is None
    assert traceparent(ShadowPods(), ("node",)) is None


def test_a_malformed_traceparent_on_the_providers_copy_is_no_parent() -> None:
    shadow_pods = ShadowPods()
    body = shadowpod("1")
    body["metadata"]["annotations"] = {TRACEPARENT_ANNOTATION: "00-zz-forged"}
    shadow_pods.objects[(NAMESPACE, NAME)] = body

    async def agent_reconcile(_: tuple[str, str, str]) -> None:
        return None

    with tracing.spans_in_memory() as exporter:
        asyncio.run(Controller("agent", agent_reconcile, workers=1,
                               traceparent=lambda key: traceparent(shadow_pods, key))
                    .process(("pod", HOME_NAMESPACE, NAME)))
    [span] = _by_name(exporter.get_finished_spans(), "reconcile agent")
    assert span.parent is None
