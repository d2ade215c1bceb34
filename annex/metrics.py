"""Prometheus /metrics for every component, through `prometheus_client`.

The components keep counting as they always have (plain integers, `annex.metrics_histogram`,
the request counters of `annex.request_metrics`): nothing on the hot path takes a lock or
allocates for the metrics. The collectors here read those counts when Prometheus scrapes, and
`prometheus_client` writes the exposition: label values escaped, the text format 0.0.4 or
OpenMetrics as the scraper's Accept header asks.

What every controller-runtime operator exports, named and labelled as it does, so that the
dashboards and alerts written for those read annex too:
- `controller_runtime_reconcile_total{controller,result}` (result: success, error, requeue,
  requeue_after), `controller_runtime_reconcile_errors_total{controller}`,
  `controller_runtime_reconcile_time_seconds{controller}`,
  `controller_runtime_max_concurrent_reconciles{controller}`;
- client-go's workqueue metrics, `name` the controller: `workqueue_depth`, `workqueue_adds_total`,
  `workqueue_retries_total`, `workqueue_queue_duration_seconds`, `workqueue_work_duration_seconds`;
- client-go's `rest_client_requests_total{code,method,host}` and
  `rest_client_request_duration_seconds{verb,host}`;
- `leader_election_master_status{name}` where the component elects a leader;
- `controller_runtime_webhook_latency_seconds{webhook}` and
  `controller_runtime_webhook_requests_total{webhook,code}` for admission webhooks;
- `process_*` and `python_*` (prometheus_client's own collectors), and
  `annex_build_info{component,version}`.

Served with the probes (`annex.probes`); with `secure`, only to callers whose bearer token a
TokenReview accepts and whom a SubjectAccessReview lets `get` the non-resource URL /metrics, as
kube-rbac-proxy and controller-runtime's secure metrics serving decide.
"""

from __future__ import annotations

import logging
import platform
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Generic, TypeVar

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from annex.api_errors import ApiError, error_message
from annex.controller import Controller
from annex.metrics_histogram import DEFAULT_BUCKETS, Histogram
from annex.request_metrics import RequestMetrics
from annex.reviews import Reviews
from annex.transport_errors import TransportError

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.Response]]


@dataclass(frozen=True)
class Family:
    """One metric family's name, type, help and label names: what a collector declares (its
    `describe`, which the chart's dashboard test reads) and fills in at scrape time."""

    name: str
    kind: str
    """counter, gauge or histogram."""
    help: str
    labels: tuple[str, ...] = ()

    def new(self) -> Any:
        kind = {"counter": CounterMetricFamily, "gauge": GaugeMetricFamily,
                "histogram": HistogramMetricFamily}[self.kind]
        return kind(self.name, self.help, labels=self.labels)

    def series_names(self) -> tuple[str, ...]:
        """The names its samples carry in an exposition (what a PromQL query selects)."""
        if self.kind == "counter":
            return (self.name if self.name.endswith("_total") else f"{self.name}_total",)
        if self.kind == "histogram":
            return tuple(f"{self.name}_{suffix}" for suffix in ("bucket", "sum", "count"))
        return (self.name,)


V = TypeVar("V")
Reader = Callable[[], Iterable[tuple[Sequence[str], V]]]
"""What a family's samples are read with at scrape time: (label values, value)."""


def add_histogram(family: Any, labels: list[str], histogram: Histogram) -> None:
    buckets, total = histogram.snapshot()
    family.add_metric(labels, buckets, total)


class Declared(Collector):
    """A collector whose families are declared up front (`families`)."""

    families: tuple[Family, ...] = ()

    def describe(self) -> list[Metric]:
        return [family.new() for family in self.families]

    def collect(self) -> Iterable[Metric]:  # pragma: no cover - every collector overrides it
        return []


RECONCILE_TOTAL = Family("controller_runtime_reconcile_total", "counter",
                         "Total number of reconciliations per controller",
                         ("controller", "result"))
RECONCILE_ERRORS = Family("controller_runtime_reconcile_errors_total", "counter",
                          "Total number of reconciliation errors per controller",
                          ("controller",))
RECONCILE_TIME = Family("controller_runtime_reconcile_time_seconds", "histogram",
                        "Length of time per reconciliation per controller", ("controller",))
MAX_CONCURRENT = Family("controller_runtime_max_concurrent_reconciles", "gauge",
                        "Maximum number of concurrent reconciles per controller",
                        ("controller",))
WORKQUEUE_DEPTH = Family("workqueue_depth", "gauge", "Current depth of workqueue", ("name",))
WORKQUEUE_ADDS = Family("workqueue_adds_total", "counter",
                        "Total number of adds handled by workqueue", ("name",))
WORKQUEUE_RETRIES = Family("workqueue_retries_total", "counter",
                           "Total number of retries handled by workqueue", ("name",))
WORKQUEUE_QUEUE_DURATION = Family(
    "workqueue_queue_duration_seconds", "histogram",
    "How long in seconds an item stays in workqueue before being requested", ("name",))
WORKQUEUE_WORK_DURATION = Family(
    "workqueue_work_duration_seconds", "histogram",
    "How long in seconds processing an item from workqueue takes.", ("name",))
RESULTS = ("success", "error", "requeue", "requeue_after")
"""controller-runtime's reconcile results, each exported from the start (0 until it happens)."""


class ControllerCollector(Declared):
    """The controller-runtime and workqueue families of a component's controllers, and the
    component's own `<prefix>_controller_reconciles_total{controller,result}` (its outcomes as
    its reconciles name them) and `<prefix>_controller_queued_keys{controller}` (keys waiting,
    parked, delayed or being reconciled: 0 once converged)."""

    def __init__(self, prefix: str, controllers: Callable[[], Sequence[Controller[Any]]]) -> None:
        self._controllers = controllers
        self._outcomes = Family(f"{prefix}_controller_reconciles_total", "counter",
                                "Reconciles by controller and result.", ("controller", "result"))
        self._queued = Family(f"{prefix}_controller_queued_keys", "gauge",
                              "Keys waiting, parked, delayed or being reconciled, by controller "
                              "(0: converged).", ("controller",))
        self.families = (RECONCILE_TOTAL, RECONCILE_ERRORS, RECONCILE_TIME, MAX_CONCURRENT,
                         WORKQUEUE_DEPTH, WORKQUEUE_ADDS, WORKQUEUE_RETRIES,
                         WORKQUEUE_QUEUE_DURATION, WORKQUEUE_WORK_DURATION, self._outcomes,
                         self._queued)

    def collect(self) -> Iterator[Metric]:
        controllers = list(self._controllers())
        total, errors, time, workers, depth, adds, retries, waited, worked, outcomes, queued = (
            family.new() for family in self.families)
        for controller in controllers:
            name, queue = [controller.name], controller.queue
            results = controller.results()
            for result in RESULTS:
                total.add_metric([*name, result], results.get(result, 0))
            errors.add_metric(name, results.get("error", 0))
            add_histogram(time, name, controller.reconcile_time)
            workers.add_metric(name, controller.workers)
            depth.add_metric(name, queue.depth())
            adds.add_metric(name, queue.adds)
            retries.add_metric(name, queue.retries)
            add_histogram(waited, name, queue.queue_duration)
            add_histogram(worked, name, queue.work_duration)
            for outcome, count in sorted(controller.outcomes().items()):
                outcomes.add_metric([*name, outcome], count)
            queued.add_metric(name, len(controller))
        yield from (total, errors, time, workers, depth, adds, retries, waited, worked, outcomes,
                    queued)


class RequestCollector(Declared):
    """client-go's request families from `annex.request_metrics.RequestMetrics`, and
    `annex_rest_client_requests_by_resource_total`, which tells what the requests did."""

    families = (
        Family("rest_client_requests_total", "counter",
               "Number of HTTP requests, partitioned by status code, method, and host.",
               ("code", "method", "host")),
        Family("annex_rest_client_requests_by_resource_total", "counter",
               "Number of HTTP requests, partitioned by status code, host, Kubernetes verb, API "
               "group and resource[/subresource].",
               ("code", "group", "host", "resource", "verb")),
        Family("rest_client_request_duration_seconds", "histogram",
               "Request latency in seconds. Broken down by verb, and host.", ("verb", "host")),
    )

    def __init__(self, requests: RequestMetrics) -> None:
        self._requests = requests

    def collect(self) -> Iterator[Metric]:
        by_method, by_resource, durations = (family.new() for family in self.families)
        methods: dict[tuple[str, str, str], int] = {}
        for (code, host, method, verb, group, resource), n in sorted(
                self._requests.snapshot().items()):
            methods[(code, method, host)] = methods.get((code, method, host), 0) + n
            by_resource.add_metric([code, group, host, resource, verb], n)
        for labels, n in sorted(methods.items()):
            by_method.add_metric(list(labels), n)
        for (host, method), histogram in self._requests.durations():
            add_histogram(durations, [method, host], histogram)
        yield from (by_method, by_resource, durations)


class _ReadAtScrape(Declared, Generic[V]):
    """Families each read at scrape time: `read()` gives its samples as (label values, V)."""

    def __init__(self, read: Sequence[tuple[Family, Reader[V]]]) -> None:
        self._read = read
        self.families = tuple(family for family, _ in read)

    def collect(self) -> Iterator[Metric]:
        for family, read in self._read:
            metric = family.new()
            for labels, value in read():
                self._add(family, metric, list(labels), value)
            yield metric

    @staticmethod
    def _add(family: Family, metric: Any, labels: list[str], value: V) -> None:
        raise NotImplementedError


class Gauges(_ReadAtScrape[float]):
    """A component's own gauges and counters, each read at scrape time."""

    @staticmethod
    def _add(family: Family, metric: Any, labels: list[str], value: float) -> None:
        if family.kind == "histogram":
            raise TypeError(f"{family.name}: use Histograms for histograms")
        metric.add_metric(labels, value)


def single(value: Callable[[], float]) -> Callable[[], list[tuple[list[str], float]]]:
    """The samples of an unlabelled gauge: `value()`."""
    return lambda: [([], value())]


class Histograms(_ReadAtScrape[Histogram]):
    """Families of `Histogram`s read at scrape time."""

    @staticmethod
    def _add(family: Family, metric: Any, labels: list[str], value: Histogram) -> None:
        add_histogram(metric, labels, value)


LEADER_STATUS = Family("leader_election_master_status", "gauge",
                       "Gauge of if the reporting system is master of the relevant lease, 0 "
                       "indicates backup, 1 indicates master. 'name' is the string used to "
                       "identify the lease. Please make sure to group by name.", ("name",))
LEADER_TRANSITIONS = Family("annex_leader_election_transitions", "gauge",
                            "The Lease's leaseTransitions as last read: how many times its "
                            "leadership changed hands.", ("name",))


def leader_collector(name: Callable[[], str], leading: Callable[[], bool],
                     transitions: Callable[[], int]) -> Gauges:
    """client-go's `leader_election_master_status{name}` (the Lease's name) and the Lease's
    transitions, which count failovers."""
    return Gauges([(LEADER_STATUS, lambda: [([name()], 1.0 if leading() else 0.0)]),
                   (LEADER_TRANSITIONS, lambda: [([name()], float(transitions()))])])


def version() -> str:
    try:
        return metadata.version("kube-annex")
    except metadata.PackageNotFoundError:
        return "unknown"


BUILD_INFO = Family("annex_build_info", "gauge",
                    "1, labelled with the component, its version and the Python it runs on.",
                    ("component", "version", "python_version"))


def build_info(component: str) -> Gauges:
    labels = [component, version(), platform.python_version()]
    return Gauges([(BUILD_INFO, lambda: [(labels, 1.0)])])


def registry(component: str, collectors: Iterable[Collector]) -> CollectorRegistry:
    """The component's registry: `collectors`, its build info, and prometheus_client's process
    (`process_*`) and Python (`python_info`, `python_gc_*`) collectors."""
    found = CollectorRegistry(auto_describe=False)
    ProcessCollector(registry=found)
    PlatformCollector(registry=found)
    GCCollector(registry=found)
    for collector in (build_info(component), *collectors):
        found.register(collector)
    return found


def declared_families(collectors: Iterable[Collector]) -> list[Family]:
    return [family for collector in collectors if isinstance(collector, Declared)
            for family in collector.families]


# --- admission webhooks -----------------------------------------------------------------------

WEBHOOK_LATENCY = Family("controller_runtime_webhook_latency_seconds", "histogram",
                         "Histogram of the latency of processing admission requests",
                         ("webhook",))
WEBHOOK_REQUESTS = Family("controller_runtime_webhook_requests_total", "counter",
                          "Total number of admission requests by HTTP status code.",
                          ("webhook", "code"))
WEBHOOK_IN_FLIGHT = Family("controller_runtime_webhook_requests_in_flight", "gauge",
                           "Current number of admission requests being served.", ("webhook",))


def request_path(request: web.Request) -> str:
    return request.path


class ServedRequests(Declared):
    """An aiohttp server's requests, counted by `middleware` on the server's loop: how long
    they took, how many got which status, how many are being answered, labelled with `label`
    of the request. By default controller-runtime's webhook families, whose `webhook` label is
    the path, as controller-runtime labels its webhooks."""

    def __init__(self, families: tuple[Family, Family, Family] = (
                     WEBHOOK_LATENCY, WEBHOOK_REQUESTS, WEBHOOK_IN_FLIGHT),
                 label: Callable[[web.Request], str] = request_path,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.families = families
        self._label = label
        self._clock = clock
        self._latency: dict[str, Histogram] = {}
        self._codes: dict[tuple[str, str], int] = {}
        self._in_flight: dict[str, int] = {}

    @web.middleware
    async def middleware(self, request: web.Request,
                         handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                         ) -> web.StreamResponse:
        label = self._label(request)
        started = self._clock()
        self._in_flight[label] = self._in_flight.get(label, 0) + 1
        code = "500"
        try:
            response = await handler(request)
            code = str(response.status)
            return response
        except web.HTTPException as error:
            code = str(error.status)
            raise
        finally:
            self._in_flight[label] -= 1
            self._codes[(label, code)] = self._codes.get((label, code), 0) + 1
            histogram = self._latency.get(label)
            if histogram is None:
                histogram = self._latency[label] = Histogram(DEFAULT_BUCKETS)
            histogram.observe(self._clock() - started)

    def collect(self) -> Iterator[Metric]:
        latency, requests, in_flight = (family.new() for family in self.families)
        for label, histogram in sorted(self._latency.items()):
            add_histogram(latency, [label], histogram)
        for (label, code), count in sorted(self._codes.items()):
            requests.add_metric([label, code], count)
        for label, count in sorted(self._in_flight.items()):
            in_flight.add_metric([label], count)
        yield from (latency, requests, in_flight)


# --- serving ----------------------------------------------------------------------------------

class MetricsAccess:
    """Who may scrape: a bearer token that a TokenReview authenticates, whose user a
    SubjectAccessReview allows `get` on the non-resource URL /metrics (kube-rbac-proxy's and
    controller-runtime's `WithAuthenticationAndAuthorization`). Both reviews go to the
    component's own cluster; answers are cached as a kubelet caches them."""

    def __init__(self, reviews: Reviews) -> None:
        self.reviews = reviews

    async def refusal(self, request: web.Request) -> web.Response | None:
        """None when the caller may scrape; else the answer: 401 unauthenticated, 403 not
        authorized, 500 when the API server could not be asked."""
        header = request.headers.get("Authorization", "")
        if not header.lower().startswith("bearer ") or not header[7:].strip():
            return web.Response(status=401, text="Unauthorized")
        try:
            caller = await self.reviews.authenticate_token(header[7:].strip())
            if caller is None:
                return web.Response(status=401, text="Unauthorized")
            allowed = await self.reviews.authorize(
                caller, {"path": request.path, "verb": request.method.lower()},
                non_resource=True)
        except (ApiError, TransportError, TimeoutError) as error:
            log.warning("metrics: cannot review the caller's token: %s", error_message(error))
            return web.Response(status=500, text="Internal Server Error")
        if not allowed:
            return web.Response(status=403, text=(
                f'Forbidden (user={caller.name}, verb={request.method.lower()}, '
                f'resource=, subresource=)'))
        return None


def metrics_handler(found: CollectorRegistry, access: MetricsAccess | None = None) -> Handler:
    """The /metrics handler: the exposition in the format the Accept header asks for, to the
    callers `access` lets in (everyone without it)."""

    async def handle(request: web.Request) -> web.Response:
        if access is not None:
            refused = await access.refusal(request)
            if refused is not None:
                return refused
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        return web.Response(body=encoder(found), headers={"Content-Type": content_type})

    return handle
