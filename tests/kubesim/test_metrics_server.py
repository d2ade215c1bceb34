"""kubesim's metrics-server: metrics.k8s.io/v1beta1 only while it runs (an aggregated API on
real clusters), PodMetrics and NodeMetrics from the kubelets' /metrics/resource, rates once
two scrapes exist, RBAC as the API server checks it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from shared.quantity import parse_quantity
from tests.conftest import ClusterHandle
from tests.helpers import wait_for
from tests.kubesim.rest import call
from tests.kubesim.test_kubelet_api import busybox, started

pytestmark = pytest.mark.kubesim_only(reason="installs and removes kubesim's metrics-server at "
                                             "will")

PODS = "/apis/metrics.k8s.io/v1beta1/namespaces/{}/pods"


@pytest.fixture
def metrics_server(home: ClusterHandle) -> Iterator[Any]:
    from kubesim.metricsserver import (
        MetricsServerSettings,
        install_metrics_server,
        remove_metrics_server,
    )

    server = home.run(lambda: install_metrics_server(
        home.sim, MetricsServerSettings(resolution=0.5), serving=True))
    try:
        yield server
    finally:
        home.thread.call(remove_metrics_server(home.sim, server))


def groups(home: ClusterHandle) -> list[str]:
    return [g["name"] for g in call(home, "GET", "/apis")[1]["groups"]]


def test_discovery_lists_the_metrics_api_only_while_metrics_server_runs(
        home: ClusterHandle, metrics_server: Any) -> None:
    assert "metrics.k8s.io" in groups(home)
    status, body = call(home, "GET", "/apis/metrics.k8s.io/v1beta1")
    assert status == 200
    entries = {r["name"]: r for r in body["resources"]}
    assert (entries["pods"]["kind"], entries["pods"]["namespaced"]) == ("PodMetrics", True)
    assert (entries["nodes"]["kind"], entries["nodes"]["namespaced"]) == ("NodeMetrics", False)
    assert sorted(entries["pods"]["verbs"]) == ["get", "list"]


def test_without_metrics_server_the_api_is_absent(home: ClusterHandle,
                                                  namespace: str) -> None:
    assert "metrics.k8s.io" not in groups(home)
    assert call(home, "GET", PODS.format(namespace))[0] == 404


def test_pod_and_node_usage_once_two_scrapes_give_a_rate(
        home: ClusterHandle, namespace: str, metrics_server: Any) -> None:
    name = started(home, namespace, busybox("busy", ["sh", "-c", "sleep 3600"]))

    def sample() -> dict[str, Any] | None:
        status, body = call(home, "GET", PODS.format(namespace) + f"/{name}")
        return body if status == 200 else None

    metrics = wait_for(sample, timeout=30, message="the pod has metrics")
    assert metrics["kind"] == "PodMetrics" and metrics["metadata"]["namespace"] == namespace
    assert metrics["window"].endswith("s") and metrics["timestamp"].endswith("Z")
    [container] = metrics["containers"]
    # the simulated steady load: 1 millicore, 4 MiB
    assert container["name"] == "main" and container["usage"]["memory"] == "4Mi"
    assert 0.0009 < parse_quantity(container["usage"]["cpu"]) < 0.0011
    listed = call(home, "GET", PODS.format(namespace))[1]
    assert listed["kind"] == "PodMetricsList" and [i["metadata"]["name"]
                                                  for i in listed["items"]] == [name]
    node = home.core.read_namespaced_pod(name, namespace).spec.node_name
    status, node_metrics = call(home, "GET", f"/apis/metrics.k8s.io/v1beta1/nodes/{node}")
    assert status == 200 and node_metrics["kind"] == "NodeMetrics"
    assert node_metrics["usage"]["memory"].endswith("Mi")


def test_refusals_as_metrics_server_words_them(home: ClusterHandle, namespace: str,
                                               metrics_server: Any) -> None:
    status, body = call(home, "GET", PODS.format(namespace) + "/nothing")
    assert status == 404
    assert body["message"] == f'podmetrics.metrics.k8s.io "{namespace}/nothing" not found'
    assert call(home, "POST", PODS.format(namespace), {})[0] == 405
