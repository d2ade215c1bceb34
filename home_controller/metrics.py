"""What the home controller shows on /metrics (`annex.metrics`): its controllers'
controller-runtime and workqueue families, its client's requests, the process and its build."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prometheus_client.registry import Collector

from annex.controller import Controller
from annex.kubeapi import REQUESTS, ClusterApi, RequestMetrics
from annex.metrics import (
    ControllerCollector,
    Handler,
    MetricsAccess,
    RequestCollector,
    ServedRequests,
    metrics_handler,
    registry,
)
from annex.reviews import Reviews

PREFIX = "annex_home_controller"
COMPONENT = "home-controller"


def collectors(controllers: Sequence[Controller[Any]], served: Sequence[ServedRequests] = (),
               requests: RequestMetrics = REQUESTS) -> list[Collector]:
    """`served`: the agents' admission webhook's requests."""
    return [ControllerCollector(PREFIX, lambda: controllers), *served,
            RequestCollector(requests)]


def scrape(controllers: Sequence[Controller[Any]], api: ClusterApi, secure: bool,
           served: Sequence[ServedRequests] = ()) -> Handler:
    """The /metrics handler; `secure`: for the callers the home cluster's reviews let in."""
    return metrics_handler(registry(COMPONENT, collectors(controllers, served)),
                           MetricsAccess(Reviews(api)) if secure else None)
