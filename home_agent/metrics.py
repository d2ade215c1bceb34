"""/healthz, /readyz and Prometheus /metrics on the metrics address (plain HTTP, for probes and
scraping). Ready means the home side is listed: the pod webhook answers from it, on a standby
replica as on the leader. So a standby is ready too (its /readyz says it is a standby): the
webhook Service sends to both, and a PodDisruptionBudget of minAvailable 1 counts both, so a
node drain may evict the leader (which hands over) instead of being blocked by it.

/metrics (`annex.metrics`): the controller-runtime, workqueue and client-go families of the
agent's controllers and clients (both clusters: the `host` label tells them apart), the
election, the pod webhook's and the kubelet API's requests, and the agent's own: the virtual
node's readiness, the remote health checks' latency, how far behind reflection is."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.registry import Collector

from annex.controller import Controller
from annex.kubeapi import ClusterApi
from annex.leader import LeaderElector
from annex.metrics import (
    ControllerCollector,
    Family,
    Gauges,
    Histograms,
    MetricsAccess,
    RequestCollector,
    ServedRequests,
    leader_collector,
    metrics_handler,
    registry,
    single,
)
from annex.metrics_histogram import Histogram
from annex.mirror import Mirror
from annex.probes import serve_probes
from annex.request_metrics import REQUESTS, RequestMetrics
from annex.reviews import Reviews

log = logging.getLogger(__name__)

PREFIX = "annex_home_agent"
COMPONENT = "home-agent"


@dataclass(frozen=True)
class AgentFigures:
    """What /metrics reads of the agent at scrape time: its remote, its node's name and
    whether the remote answers, its pods and ShadowPods, whether both sides are listed, and how
    long the health checks took."""

    remote_cluster_id: str
    node_name: Callable[[], str]
    remote_ready: Callable[[], bool]
    pods: Mirror
    shadow_pods: Mirror
    synced: Callable[[], bool]
    health_checks: Histogram


class Metrics:
    """Reconcile outcomes per key kind, thread-safe (workers count, the server reads), and what
    /metrics reads at scrape time (set once it is made)."""

    def __init__(self, requests: RequestMetrics = REQUESTS) -> None:
        self._lock = threading.Lock()
        self._reconciles: Counter[tuple[str, str]] = Counter()
        self._requests = requests
        self.controllers: Sequence[Controller[Any]] = ()
        """Whose outcomes and queued keys are shown per controller (set once they are made:
        the agent's counts its outcomes here per key kind)."""
        self.reflection: Sequence[Controller[Any]] = ()
        """The reflection's controllers, whose lag is shown."""
        self.leading: Callable[[], bool] = lambda: True
        self.leader: Callable[[], str] = lambda: ""
        """With leader election: whether this replica leads, and who does ("" unknown)."""
        self.elector: LeaderElector | None = None
        self.served: list[ServedRequests] = []
        """The requests the pod webhook and the kubelet API answered."""

    def role(self) -> str:
        if self.leading():
            return "leader"
        return f"standby (leader: {self.leader() or 'none yet'})"

    def reconciled(self, kind: str, result: str) -> None:
        with self._lock:
            self._reconciles[(kind, result)] += 1

    def _reconciles_by_kind(self) -> list[tuple[list[str], float]]:
        with self._lock:
            return [([kind, result], count)
                    for (kind, result), count in sorted(self._reconciles.items())]

    def collectors(self, figures: AgentFigures) -> list[Collector]:
        """Everything /metrics shows but the process' and build's families."""
        remote = figures.remote_cluster_id

        found: list[Collector] = [
            Gauges([
                (Family(f"{PREFIX}_reconciles_total", "counter",
                        "Reconciles by key kind and result.", ("kind", "result")),
                 self._reconciles_by_kind),
                (Family(f"{PREFIX}_remote_ready", "gauge",
                        "1 while the remote API server answers."),
                 single(lambda: 1.0 if figures.remote_ready() else 0.0)),
                (Family("annex_virtual_node_ready", "gauge",
                        "1 while the virtual node is Ready (its remote answers its health "
                        "checks).", ("node", "remote_cluster")),
                 lambda: [([figures.node_name(), remote], 1.0 if figures.remote_ready() else 0.0)]),
                (Family(f"{PREFIX}_pods", "gauge", "Pods bound to the virtual node."),
                 single(lambda: float(figures.pods.size()))),
                (Family(f"{PREFIX}_shadow_pods", "gauge",
                        "ShadowPods of this agent on the remote."),
                 single(lambda: float(figures.shadow_pods.size()))),
                (Family(f"{PREFIX}_synced", "gauge",
                        "1 once both clusters' watches have listed everything."),
                 single(lambda: 1.0 if figures.synced() else 0.0)),
                (Family(f"{PREFIX}_leader", "gauge",
                        "1 while this replica leads (writes); 0 on a standby."),
                 single(lambda: 1.0 if self.leading() else 0.0)),
                (Family("annex_reflection_lag_seconds", "gauge",
                        "How long the oldest key in line of each reflection controller has "
                        "waited (0: nothing waits).", ("controller",)),
                 lambda: [([c.name], c.queue.longest_wait(time.monotonic()))
                          for c in self.reflection]),
            ]),
            Histograms([(Family("annex_remote_health_check_duration_seconds", "histogram",
                                "How long the remote API server's /livez took to answer (or "
                                "fail).", ("remote_cluster",)),
                         lambda: [([remote], figures.health_checks)])]),
            ControllerCollector(PREFIX, lambda: self.controllers),
            RequestCollector(self._requests),
            *self.served,
        ]
        if self.elector is not None:
            elector = self.elector
            found.append(leader_collector(lambda: elector.name, self.leading,
                                          lambda: elector.transitions))
        return found

    def registry(self, figures: AgentFigures) -> CollectorRegistry:
        return registry(COMPONENT, self.collectors(figures))


async def serve(metrics: Metrics, figures: AgentFigures, address: str | None, secure: bool,
                home: ClusterApi, home_listed: Callable[[], bool]) -> web.AppRunner | None:
    """The probes and /metrics on `address` (none without it), ready once `home_listed`;
    `secure`: only for callers `home` allows to get /metrics."""
    if not address:
        return None
    host, _, port = address.rpartition(":")
    access = MetricsAccess(Reviews(home)) if secure else None
    runner = await serve_probes(host or "0.0.0.0", int(port), ready=home_listed,
                                not_ready="home cluster not listed yet",
                                scrape=metrics_handler(metrics.registry(figures), access),
                                ready_text=lambda: f"ok: {metrics.role()}")
    log.info("metrics and probes on http://%s%s", address,
             " (metrics for callers allowed to get /metrics)" if access else "")
    return runner
