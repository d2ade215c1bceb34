"""The home controller's /metrics (the controller run in the test's process, against the `home`
cluster): with --metrics-secure, 401 without a token, 403 for a token whose user may not get
/metrics, 200 with the <release>-metrics-reader rights the chart grants a scraper (the
TokenReview and the SubjectAccessReview on the non-resource URL /metrics answered by the API
server); the controller-runtime families, which move when a ForeignCluster is reconciled."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from kubernetes import client

from home_controller.runner import run
from home_controller.settings import Settings
from shared.api.foreign_cluster import FOREIGN_CLUSTER
from tests.conftest import ClusterHandle
from tests.helpers import free_port, metric_samples, sample

READER_RULES = [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
"""The chart's <release>-metrics-reader (charts/*/templates/_metrics.tpl)."""


def _token(home: ClusterHandle, namespace: str, name: str) -> str:
    home.core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    answer = home.core.create_namespaced_service_account_token(
        name, namespace, {"spec": {"expirationSeconds": 3600}})
    return str(answer.status.token)


@pytest.fixture
async def scraper(home: ClusterHandle, crds: None) -> AsyncIterator[Any]:
    """(GET /metrics with a token → (status, text), the reader's token, the stranger's token),
    the controller running with --metrics-secure in a namespace of its own."""
    namespace = f"metrics-{uuid.uuid4().hex[:8]}"
    reader = f"{namespace}-reader"
    rbac = client.RbacAuthorizationV1Api(home.api_client)
    home.core.create_namespace({"metadata": {"name": namespace}})
    rbac.create_cluster_role({"metadata": {"name": reader}, "rules": READER_RULES})
    rbac.create_cluster_role_binding({
        "metadata": {"name": reader},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": reader},
        "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": namespace}]})
    tokens = (_token(home, namespace, "prometheus"), _token(home, namespace, "stranger"))
    port = free_port()
    stop = asyncio.Event()
    controller = asyncio.create_task(run(Settings(
        kubeconfig=str(home.kubeconfig), namespace=namespace, health_address="127.0.0.1",
        health_port=port, metrics_secure=True, workers=1), stop))
    session = aiohttp.ClientSession(f"http://127.0.0.1:{port}")

    async def get(token: str | None) -> tuple[int, str]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with asyncio.timeout(30):
            while True:
                try:
                    async with session.get("/metrics", headers=headers) as answer:
                        return answer.status, await answer.text()
                except aiohttp.ClientConnectionError:
                    if controller.done():
                        controller.result()
                    await asyncio.sleep(0.1)  # not serving yet

    try:
        yield get, *tokens
    finally:
        await session.close()
        stop.set()
        await asyncio.wait_for(controller, 30)
        rbac.delete_cluster_role_binding(reader)
        rbac.delete_cluster_role(reader)
        home.core.delete_namespace(namespace)


async def test_secure_metrics_need_a_token_allowed_to_get_them(scraper: Any) -> None:
    get, reader, stranger = scraper
    assert (await get(None))[0] == 401
    assert (await get("not-a-token"))[0] == 401
    status, text = await get(stranger)
    assert status == 403 and "stranger" in text
    status, text = await get(reader)
    assert status == 200
    found = metric_samples(text)
    [build] = [dict(labels) for name, labels in found if name == "annex_build_info"]
    assert build["component"] == "home-controller"
    assert sample(found, "workqueue_depth", name="foreignclusters") is not None
    assert sample(found, "controller_runtime_max_concurrent_reconciles",
                  controller="foreignclusters") == 1
    assert any(name == "rest_client_requests_total" for name, _ in found)
    assert any(name == "process_resident_memory_bytes" for name, _ in found)


async def test_reconciles_move_the_controller_runtime_counts(scraper: Any,
                                                             home: ClusterHandle) -> None:
    get, reader, _ = scraper

    async def reconciles() -> float:
        status, text = await get(reader)
        assert status == 200
        found = metric_samples(text)
        return sum(value for (name, labels), value in found.items()
                   if name == "controller_runtime_reconcile_total"
                   and ("controller", "foreignclusters") in labels)

    before = await reconciles()
    name = f"provider-{uuid.uuid4().hex[:8]}"
    resource = home.dynamic.resources.get(api_version=FOREIGN_CLUSTER.api_version,
                                          kind=FOREIGN_CLUSTER.kind)
    resource.create(body={"apiVersion": FOREIGN_CLUSTER.api_version,
                          "kind": FOREIGN_CLUSTER.kind, "metadata": {"name": name},
                          "spec": {"clusterId": name}})
    try:
        async with asyncio.timeout(30):
            while await reconciles() <= before:
                await asyncio.sleep(0.2)
        status, text = await get(reader)
        found = metric_samples(text)
        assert (sample(found, "workqueue_adds_total", name="foreignclusters") or 0) >= 1
        assert (sample(found, "controller_runtime_reconcile_time_seconds_count",
                       controller="foreignclusters") or 0) >= 1
    finally:
        resource.delete(name=name)
