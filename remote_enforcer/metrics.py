"""Counters the enforcer exposes on /metrics (Prometheus text format, served by annex.probes):
its own, its controllers' (annex.controller) and its clients' requests."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from annex.controller import Controller, metric_families
from annex.kubeapi import REQUESTS, RequestMetrics
from annex.probes import exposition, metric_family

PREFIX = "annex_remote_enforcer"
HELP = {
    "pods_created_total": "Pods created for ShadowPods (first creations and recreations).",
    "pod_recreations_total": "Pods recreated after they vanished.",
    "admissions_total": "ShadowPod admission reviews by result.",
}


class Metrics:
    """The enforcer's counters and gauges, and the requests its clients made."""

    def __init__(self, requests: RequestMetrics = REQUESTS) -> None:
        self._counts: Counter[tuple[str, str]] = Counter()
        self.gauges: dict[str, tuple[str, Callable[[], float]]] = {}
        self.controllers: list[Controller[Any]] = []
        self._requests = requests

    def count(self, name: str, labels: str = "") -> None:
        """Add one to counter `name`; `labels` is the rendered label set ('result="allowed"')."""
        self._counts[(name, labels)] += 1

    def value(self, name: str, labels: str = "") -> int:
        return self._counts[(name, labels)]

    def exposition(self) -> str:
        lines: list[str] = []
        for name, help_text in HELP.items():
            series = sorted((labels, count) for (metric, labels), count in self._counts.items()
                            if metric == name)
            lines += metric_family(f"{PREFIX}_{name}", "counter", help_text, series)
        for name, (help_text, read) in sorted(self.gauges.items()):
            lines += metric_family(f"{PREFIX}_{name}", "gauge", help_text, [("", read())])
        return exposition([*lines, *metric_families(PREFIX, self.controllers),
                           *self._requests.families()])
