"""What the enforcer shows on /metrics (`annex.metrics`): its own counters and gauges, the pods
it runs for consumers by phase, its controllers' and webhooks' controller-runtime families, and
its client's requests."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.registry import Collector

from annex.controller import Controller
from annex.metrics import (
    ControllerCollector,
    Family,
    Gauges,
    RequestCollector,
    ServedRequests,
    registry,
    single,
)
from annex.request_metrics import REQUESTS, RequestMetrics
from shared.wellknown import ORIGIN_CLUSTER_LABEL

PREFIX = "annex_remote_enforcer"
COMPONENT = "remote-enforcer"
COUNTERS = {
    "pods_created_total": Family(f"{PREFIX}_pods_created_total", "counter",
                                 "Pods created for ShadowPods (first creations and "
                                 "recreations)."),
    "pod_recreations_total": Family(f"{PREFIX}_pod_recreations_total", "counter",
                                    "Pods recreated after they vanished."),
    "admissions_total": Family(f"{PREFIX}_admissions_total", "counter",
                               "ShadowPod admission reviews by result.", ("result",)),
    "admissions_forwarded_total": Family(
        f"{PREFIX}_admissions_forwarded_total", "counter",
        "Reviews counting against a quota that this replica, not leading, forwarded to the "
        "leader, by whether a leader answered.", ("result",)),
}
OFFLOADED_PODS = Family("annex_offloaded_pods", "gauge",
                        "Pods run for consumers (ShadowPods' pods), by consumer cluster and "
                        "phase.", ("consumer", "phase"))


class OffloadedPods:
    """The consumers' pods by (consumer, phase), kept from the pods watch: each pod's last
    (consumer, phase) by uid, so that a scrape reads counts and never walks the pods."""

    def __init__(self) -> None:
        self._pods: dict[str, tuple[str, str]] = {}
        self.counts: Counter[tuple[str, str]] = Counter()

    def on_pod(self, event_type: str | None, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        consumer = (meta.get("labels") or {}).get(ORIGIN_CLUSTER_LABEL)
        before = self._pods.pop(uid, None)
        if before is not None:
            self.counts[before] -= 1
            if not self.counts[before]:
                del self.counts[before]
        if event_type == "DELETED" or not consumer:
            return
        now = (str(consumer), str((pod.get("status") or {}).get("phase") or "Pending"))
        self._pods[uid] = now
        self.counts[now] += 1

    def samples(self) -> list[tuple[list[str], float]]:
        return [([consumer, phase], float(count))
                for (consumer, phase), count in sorted(self.counts.items())]


class Metrics:
    """The enforcer's counters and gauges, and what its /metrics reads at scrape time."""

    def __init__(self, requests: RequestMetrics = REQUESTS) -> None:
        self._counts: Counter[tuple[str, tuple[str, ...]]] = Counter()
        self.gauges: dict[str, tuple[str, Callable[[], float]]] = {}
        self.controllers: list[Controller[Any]] = []
        self.pods = OffloadedPods()
        self.webhooks = ServedRequests()
        """The admission webhooks' requests (their server counts them)."""
        self.extra: list[Collector] = []
        """More families (the leader election's)."""
        self._requests = requests

    def count(self, name: str, labels: Sequence[str] = ()) -> None:
        """Add one to counter `name` (a key of COUNTERS), with its label values."""
        self._counts[(name, tuple(labels))] += 1

    def value(self, name: str, labels: Sequence[str] = ()) -> int:
        return self._counts[(name, tuple(labels))]

    def _counted(self, name: str) -> Callable[[], list[tuple[list[str], float]]]:
        return lambda: [(list(labels), float(count))
                        for (counter, labels), count in sorted(self._counts.items())
                        if counter == name]

    def collectors(self) -> list[Collector]:
        read: list[tuple[Family, Callable[[], list[tuple[list[str], float]]]]] = [
            (family, self._counted(name)) for name, family in COUNTERS.items()]
        read += [(Family(f"{PREFIX}_{name}", "gauge", help_text), single(value))
                 for name, (help_text, value) in sorted(self.gauges.items())]
        return [
            Gauges([*read, (OFFLOADED_PODS, self.pods.samples)]),
            ControllerCollector(PREFIX, lambda: self.controllers),
            self.webhooks,
            RequestCollector(self._requests),
            *self.extra,
        ]

    def registry(self) -> CollectorRegistry:
        return registry(COMPONENT, self.collectors())
