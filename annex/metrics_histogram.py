"""A histogram cheap enough for the hot path: one series, written from one thread (the event loop
of the queue or server it times), with no lock and no allocation per observation — a bucket's
count and the sum are bumped in place. The metrics collectors read it at scrape time, from any
thread: a scrape may see an observation in a bucket before it sees it in the sum, which a
Prometheus rate over minutes does not notice.

The bucket bounds of controller-runtime and client-go, so that their dashboards and alerts read
ours as they read theirs."""

from __future__ import annotations

from bisect import bisect_left

from prometheus_client.utils import floatToGoString

RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5,
                     0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0,
                     6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0)
"""controller-runtime's controller_runtime_reconcile_time_seconds buckets."""
WORKQUEUE_BUCKETS = tuple(10.0 ** exponent for exponent in range(-8, 2))
"""client-go's workqueue duration buckets (prometheus.ExponentialBuckets(10e-9, 10, 10)):
10 ns to 10 s."""
DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Prometheus' default buckets (controller-runtime's webhook latency uses them)."""


class Histogram:
    """Observations in seconds, bucketed by `bounds` (upper bounds, inclusive, ascending)."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        """Observations per bucket, not cumulative; the last is above every bound."""
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(self.bounds, seconds)] += 1  # the first bound >= seconds
        self.total += seconds

    def snapshot(self) -> tuple[list[tuple[str, float]], float]:
        """Cumulative buckets as prometheus_client's HistogramMetricFamily takes them
        ((le, count) with "+Inf" last), and the sum."""
        counts, total = list(self.counts), self.total
        buckets, running = [], 0
        for bound, count in zip((*map(floatToGoString, self.bounds), "+Inf"), counts, strict=True):
            running += count
            buckets.append((bound, float(running)))
        return buckets, total

