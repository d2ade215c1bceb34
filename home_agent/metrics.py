"""/healthz, /readyz and Prometheus /metrics on the metrics address (plain HTTP, for probes and
scraping). Ready means the home side is listed: the pod webhook answers from it, on a standby
replica as on the leader. So a standby is ready too (its /readyz says it is a standby): the
webhook Service sends to both, and a PodDisruptionBudget of minAvailable 1 counts both, so a
node drain may evict the leader (which hands over) instead of being blocked by it."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from aiohttp import web

from annex.controller import Controller, metric_families
from annex.kubeapi import REQUESTS, RequestMetrics
from annex.probes import exposition, metric_family, serve_probes
from home_agent.agent import Agent

log = logging.getLogger(__name__)


class Metrics:
    """Reconcile outcomes per key kind, thread-safe (workers count, the server reads), every
    controller's counts, and the requests the agent's clients made (both clusters: the `host`
    label tells them apart)."""

    def __init__(self, requests: RequestMetrics = REQUESTS) -> None:
        self._lock = threading.Lock()
        self._reconciles: Counter[tuple[str, str]] = Counter()
        self._requests = requests
        self.controllers: Sequence[Controller[Any]] = ()
        """Whose outcomes and queued keys are shown per controller (set once they are made:
        the agent's counts its outcomes here per key kind)."""
        self.leading: Callable[[], bool] = lambda: True
        self.leader: Callable[[], str] = lambda: ""
        """With leader election: whether this replica leads, and who does ("" unknown)."""

    def role(self) -> str:
        if self.leading():
            return "leader"
        return f"standby (leader: {self.leader() or 'none yet'})"

    def reconciled(self, kind: str, result: str) -> None:
        with self._lock:
            self._reconciles[(kind, result)] += 1

    def exposition(self, agent: Agent) -> str:
        with self._lock:
            reconciles = [(f'kind="{kind}",result="{result}"', count)
                          for (kind, result), count in sorted(self._reconciles.items())]
        return exposition([
            *metric_family("annex_home_agent_reconciles_total", "counter",
                           "Reconciles by key kind and result.", reconciles),
            *metric_family("annex_home_agent_remote_ready", "gauge",
                           "1 while the remote API server answers.",
                           [("", 1 if agent.health.ready else 0)]),
            *metric_family("annex_home_agent_pods", "gauge", "Pods bound to the virtual node.",
                           [("", agent.mirrors.pods.size())]),
            *metric_family("annex_home_agent_shadow_pods", "gauge",
                           "ShadowPods of this agent on the remote.",
                           [("", agent.mirrors.shadow_pods.size())]),
            *metric_family("annex_home_agent_synced", "gauge",
                           "1 once both clusters' watches have listed everything.",
                           [("", 1 if agent.home_synced.is_set() and agent.remote_synced()
                             else 0)]),
            *metric_family("annex_home_agent_leader", "gauge",
                           "1 while this replica leads (writes); 0 on a standby.",
                           [("", 1 if self.leading() else 0)]),
            *metric_families("annex_home_agent", self.controllers),
            *self._requests.families(),
        ])


async def serve(agent: Agent, metrics: Metrics) -> web.AppRunner | None:
    address = agent.config.metrics_address
    if not address:
        return None
    host, _, port = address.rpartition(":")
    runner = await serve_probes(host or "0.0.0.0", int(port), ready=agent.home_synced.is_set,
                                not_ready="home cluster not listed yet",
                                scrape=lambda: metrics.exposition(agent),
                                ready_text=lambda: f"ok: {metrics.role()}")
    log.info("metrics and probes on http://%s", address)
    return runner
