"""The requests a process's API clients made, counted and timed as client-go counts a Kubernetes
component's requests (`RequestMetrics`, the process-wide `REQUESTS`); every component exports
them on its /metrics (`annex.metrics.RequestCollector`)."""

from __future__ import annotations

import functools
import threading
from collections import Counter

from annex.api_paths import request_verb
from annex.metrics_histogram import Histogram

_counted_as = functools.lru_cache(maxsize=4096)(request_verb)
"""`request_verb`, remembered: most requests go to a few paths (a namespace's collection, a
service account's token), and the metrics ask for every one."""


DURATION_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
"""client-go's buckets for rest_client_request_duration_seconds (component-base restclient)."""


class RequestMetrics:
    """Requests a process made, thread-safe. Exported as client-go's
    `rest_client_requests_total{code,host,method}` (what every Kubernetes component exports)
    and `annex_rest_client_requests_by_resource_total{code,group,host,resource,verb}`, which
    tells what the requests did. `code` is the HTTP status, `<error>` when no answer came.
    And how long they took, as client-go's `rest_client_request_duration_seconds{host,verb}`
    (`verb` the HTTP method; from before the client-side rate limiter to the answer read;
    watches not timed), as client-go times them: the API server's share of a component's
    latency, told apart from the component's own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        """The clients of several event loops (threads) count here."""
        self._counts: Counter[tuple[str, str, str, str, str, str]] = Counter()
        self._durations: dict[tuple[str, str], Histogram] = {}
        """(host, method) → how long its requests took."""

    def count(self, host: str, method: str, path: str, code: str, watch: bool = False) -> None:
        """A request of `method` to `path` on `host` (the server's host:port) was answered with
        `code`."""
        verb, group, resource = _counted_as(method, path, watch)
        key = (code, host, method, verb, group, resource)
        with self._lock:
            self._counts[key] += 1

    def observe(self, host: str, method: str, seconds: float) -> None:
        """A request of `method` to `host` took `seconds`."""
        with self._lock:
            found = self._durations.get((host, method))
            if found is None:
                found = self._durations[(host, method)] = Histogram(DURATION_BUCKETS)
            found.observe(seconds)

    def snapshot(self) -> Counter[tuple[str, str, str, str, str, str]]:
        """(code, host, method, verb, group, resource) → requests so far."""
        with self._lock:
            return Counter(self._counts)

    def durations(self) -> list[tuple[tuple[str, str], Histogram]]:
        """((host, method), its requests' durations), sorted."""
        with self._lock:
            return sorted(self._durations.items())


REQUESTS = RequestMetrics()
"""The requests of every client of the process that was not given its own counter."""
