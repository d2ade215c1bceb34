"""What the home controller shows on /metrics (`annex.metrics`): its controllers'
controller-runtime and workqueue families, its client's requests, whether it leads, the process
and its build."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prometheus_client.registry import Collector

from annex.controller import Controller
from annex.kubeapi import ClusterApi
from annex.leader import LeaderElector
from annex.metrics import (
    ControllerCollector,
    Handler,
    MetricsAccess,
    RequestCollector,
    ServedRequests,
    leader_collector,
    metrics_handler,
    registry,
)
from annex.request_metrics import REQUESTS, RequestMetrics
from annex.reviews import Reviews

PREFIX = "annex_home_controller"
COMPONENT = "home-controller"


def collectors(controllers: Sequence[Controller[Any]], served: Sequence[ServedRequests] = (),
               requests: RequestMetrics = REQUESTS,
               elector: LeaderElector | None = None) -> list[Collector]:
    """`served`: the agents' admission webhook's requests; `elector`: its replicas' election."""
    found: list[Collector] = [ControllerCollector(PREFIX, lambda: controllers), *served,
                              RequestCollector(requests)]
    if elector is not None:
        found.append(leader_collector(lambda: elector.name, lambda: elector.leading,
                                      lambda: elector.transitions))
    return found


def scrape(controllers: Sequence[Controller[Any]], api: ClusterApi, secure: bool,
           served: Sequence[ServedRequests] = (), elector: LeaderElector | None = None
           ) -> Handler:
    """The /metrics handler; `secure`: for the callers the home cluster's reviews let in."""
    return metrics_handler(registry(COMPONENT, collectors(controllers, served,
                                                          elector=elector)),
                           MetricsAccess(Reviews(api)) if secure else None)
