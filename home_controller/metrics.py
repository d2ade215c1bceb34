"""What the home controller shows on /metrics (`annex.metrics`): its controllers'
controller-runtime and workqueue families, its client's requests, the process and its build."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.registry import Collector

from annex.controller import Controller
from annex.kubeapi import REQUESTS, ClusterApi, RequestMetrics
from annex.metrics import (
    ControllerCollector,
    Handler,
    MetricsAccess,
    RequestCollector,
    metrics_handler,
    registry,
)
from annex.reviews import Reviews

PREFIX = "annex_home_controller"
COMPONENT = "home-controller"


def collectors(controllers: Sequence[Controller[Any]],
               requests: RequestMetrics = REQUESTS) -> list[Collector]:
    return [ControllerCollector(PREFIX, lambda: controllers), RequestCollector(requests)]


def metrics_registry(controllers: Sequence[Controller[Any]]) -> CollectorRegistry:
    return registry(COMPONENT, collectors(controllers))


def scrape(controllers: Sequence[Controller[Any]], api: ClusterApi, secure: bool) -> Handler:
    """The /metrics handler; `secure`: for the callers the home cluster's reviews let in."""
    return metrics_handler(metrics_registry(controllers),
                           MetricsAccess(Reviews(api)) if secure else None)
