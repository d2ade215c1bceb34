"""annex.tracing: a span per reconcile with child spans for its API requests, and a ShadowPod's
traceparent continued by the enforcer's reconcile of it (spans read from the SDK's
InMemorySpanExporter: no collector)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from annex import tracing
from annex.api_paths import core_path
from annex.controller import Controller
from annex.kube import Connection, load_connection
from annex.kubeapi import ClusterApi
from remote_enforcer.admission import WEBHOOK_PATH, webhook_app
from remote_enforcer.leadership import Leadership
from remote_enforcer.metrics import Metrics
from shared.forge import enforcement
from shared.forge.pod import PodForgeConfig
from shared.forge.shadow_pod_patch import shadow_pod_patch
from shared.wellknown import TRACEPARENT_ANNOTATION
from tests.remote_enforcer.test_shadowpod_cache import (
    NAME,
    NAMESPACE,
    FakeApi,
    running,
    settled,
    shadowpod,
)


def _by_name(spans: Any, name: str) -> list[Any]:
    return [span for span in spans if span.name == name]


def test_a_reconcile_is_a_span_naming_its_object_with_its_api_requests_as_children(
        remote: Any) -> None:
    connection = load_connection(str(remote.kubeconfig))

    async def scenario() -> None:
        api = ClusterApi(connection)

        async def reconcile(key: tuple[str, str]) -> None:
            await api.find(core_path("configmaps", key[0], key[1]))
            await api.list(core_path("namespaces"))

        try:
            await Controller("things", reconcile, workers=1).process(("default", "absent"))
        finally:
            await api.close()

    with tracing.spans_in_memory() as exporter:
        asyncio.run(scenario())
    spans = exporter.get_finished_spans()
    [reconcile_span] = _by_name(spans, "reconcile things")
    assert reconcile_span.attributes["annex.controller"] == "things"
    assert reconcile_span.attributes["k8s.namespace.name"] == "default"
    assert reconcile_span.attributes["annex.object.name"] == "absent"
    requests = _by_name(spans, "GET")
    assert [span.attributes["url.path"] for span in requests] == [
        "/api/v1/namespaces/default/configmaps/absent", "/api/v1/namespaces"]
    assert requests[0].attributes["http.response.status_code"] == 404
    for span in requests:
        assert span.parent.span_id == reconcile_span.context.span_id
        assert span.context.trace_id == reconcile_span.context.trace_id
        assert span.attributes["server.address"]


def test_untraced_the_runtime_and_the_client_run_their_own_functions() -> None:
    async def reconcile(_: str) -> None:
        return None

    assert not tracing.enabled()
    assert tracing.traced_reconcile("things", reconcile, lambda _: (None, None),
                                    lambda _: None) is reconcile  # what a Controller runs
    api = ClusterApi(Connection(server="https://127.0.0.1:1"))
    assert "request" not in vars(api)  # the method itself: nothing wraps it


def _enforcer_reconciles(written: dict[str, Any]) -> None:
    """The enforcer reconciles the ShadowPod `written` (its pod made)."""
    async def scenario() -> None:
        api = FakeApi()
        async with running(api) as wired:
            wired.feed("shadowpods", "ADDED", written)
            await settled(wired.enforcer)
    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_the_enforcer_continues_the_trace_of_the_agent_reconcile_that_wrote_the_shadowpod(
        ) -> None:
    written: list[dict[str, Any]] = []

    async def agent_reconcile(_: tuple[str, str]) -> None:
        # What the agent's creation does with the ShadowPod it forged, before writing it.
        written.append(tracing.with_traceparent(shadowpod("1")))

    with tracing.spans_in_memory() as exporter:
        asyncio.run(Controller("pods", agent_reconcile, workers=1).process((NAMESPACE, NAME)))
        traceparent = written[0]["metadata"]["annotations"][TRACEPARENT_ANNOTATION]
        assert tracing.parse_traceparent(traceparent) is not None
        _enforcer_reconciles(written[0])
    [agent] = _by_name(exporter.get_finished_spans(), "reconcile pods")
    [enforcer] = _by_name(exporter.get_finished_spans(), "reconcile shadowpods")
    assert enforcer.context.trace_id == agent.context.trace_id
    assert enforcer.parent.span_id == agent.context.span_id
    assert enforcer.parent.is_remote


@pytest.mark.parametrize("traceparent", [
    "not-a-traceparent",
    "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # an all-zero trace id
    "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # upper case
    "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # a version it does not know
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\n",
])
def test_the_enforcer_starts_a_trace_of_its_own_for_a_malformed_traceparent(
        traceparent: str) -> None:
    assert tracing.parse_traceparent(traceparent) is None
    body = shadowpod("1")
    body["metadata"]["annotations"] = {TRACEPARENT_ANNOTATION: traceparent}
    with tracing.spans_in_memory() as exporter:
        _enforcer_reconciles(body)
    [enforcer] = _by_name(exporter.get_finished_spans(), "reconcile shadowpods")
    assert enforcer.parent is None
    assert f"{enforcer.context.trace_id:032x}" not in traceparent.lower()


def test_a_well_formed_traceparent_is_read_as_ids_and_the_sampled_flag() -> None:
    assert tracing.parse_traceparent(
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03") == (
        0x4bf92f3577b34da6a3ce929d0e0e4736, 0x00f067aa0ba902b7, 1)


def test_the_traceparent_is_neither_copied_to_the_pod_nor_removed_by_the_agent() -> None:
    traced = shadowpod("1")
    traced["metadata"]["annotations"] = {
        TRACEPARENT_ANNOTATION: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
    assert TRACEPARENT_ANNOTATION not in enforcement.desired_pod(traced)["metadata"][
        "annotations"]
    home_pod = {"metadata": {"name": NAME, "namespace": "default"},
                "spec": {"containers": [{"name": "main", "image": "nginx"}]}}
    patch = shadow_pod_patch(traced, home_pod, _forge_config()) or {}
    assert TRACEPARENT_ANNOTATION not in (patch.get("metadata") or {}).get("annotations", {})


def _forge_config() -> PodForgeConfig:
    return PodForgeConfig.model_validate(
        {"reflection": {"home_cluster_id": "home", "remote_cluster_id": "provider"}})


class AllowingAdmission:
    leadership = Leadership()  # one replica: it decides

    async def review(self, request: Mapping[str, Any]) -> tuple[bool, str]:
        return True, ""


def test_an_admission_review_is_a_span_naming_the_reviewed_object() -> None:
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "1", "operation": "CREATE", "namespace": NAMESPACE, "name": NAME,
        "kind": {"group": "offloading.liqo.io", "version": "v1beta1", "kind": "ShadowPod"}}}

    async def scenario() -> None:
        app = webhook_app(AllowingAdmission(), Metrics())  # type: ignore[arg-type]
        async with TestClient(TestServer(app)) as client:
            answer = await client.post(WEBHOOK_PATH, json=review)
            assert (await answer.json())["response"]["allowed"] is True

    with tracing.spans_in_memory() as exporter:
        asyncio.run(scenario())
    [span] = _by_name(exporter.get_finished_spans(), f"admit {WEBHOOK_PATH}")
    assert span.attributes["k8s.namespace.name"] == NAMESPACE
    assert span.attributes["annex.object.name"] == NAME
    assert span.attributes["annex.admission.operation"] == "CREATE"
    assert span.attributes["annex.admission.kind"] == "ShadowPod"
