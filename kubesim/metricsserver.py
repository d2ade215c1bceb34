"""The part of metrics-server a cluster runs: the `metrics.k8s.io/v1beta1` API (PodMetrics,
NodeMetrics), fed by scraping every Node's kubelet `/metrics/resource` each resolution, as
metrics-server does (sigs.k8s.io/metrics-server: scraper, storage, api).

On a real cluster the API is aggregated (an APIService in front of the metrics-server pod):
discovery lists `metrics.k8s.io` only where metrics-server runs, which is not the case on a
fresh kubeadm or kind cluster. So a simulated cluster serves it only when asked
(`Cluster.metrics_server`, `python -m kubesim --metrics-server`).

Kubelets are dialled as the API server dials them (its address preference and client
certificate; metrics-server presents its ServiceAccount's token instead, which a kubelet's
Webhook authorization maps to the same `nodes/metrics` check). CPU is a rate: a container
appears once two scrapes of its cumulative counter exist, its usage the increase over the
window between them; memory is the last working set.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from kubesim import errors
from kubesim.apiserver import ApiServer, User
from kubesim.errors import StatusError
from kubesim.kinds import ResourceKind
from kubesim.kubeletproxy import KubeletClient
from kubesim.responses import USER_KEY, json_response, status_response
from kubesim.selectors import SelectorError, parse_label_selector
from spdy3 import upgrade

log = logging.getLogger(__name__)
GROUP, VERSION = "metrics.k8s.io", "v1beta1"
PREFIX = f"/apis/{GROUP}/{VERSION}"
POD_METRICS = ResourceKind(GROUP, VERSION, "pods", "PodMetrics", True, verbs=("get", "list"))
NODE_METRICS = ResourceKind(GROUP, VERSION, "nodes", "NodeMetrics", False,
                            verbs=("get", "list"))
SCRAPE_TIMEOUT = 10.0
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class MetricsServerSettings:
    resolution: float = 15.0  # --metric-resolution


@dataclass
class Point:
    timestamp: float  # seconds
    cpu_seconds: float
    memory: int


@dataclass
class Series:
    """The last two points of one container or node (what a rate needs)."""

    last: Point
    previous: Point | None = None

    def add(self, point: Point) -> Series:
        if point.timestamp <= self.last.timestamp:
            return self
        if point.cpu_seconds < self.last.cpu_seconds:  # restarted: the counter began anew
            return Series(point)
        return Series(point, self.last)

    def usage(self) -> tuple[int, int, float, float] | None:
        """(nanocores, memory bytes, timestamp, window seconds) once there is a rate."""
        if self.previous is None:
            return None
        window = self.last.timestamp - self.previous.timestamp
        rate = (self.last.cpu_seconds - self.previous.cpu_seconds) / window
        return int(rate * 1e9), self.last.memory, self.last.timestamp, window


@dataclass
class Scrape:
    node: Point | None = None
    containers: dict[tuple[str, str, str], Point] = field(default_factory=dict)


def parse_resource_metrics(text: str, scraped_at: float) -> Scrape:
    """The samples of /metrics/resource metrics-server reads (Prometheus text format)."""
    cpu: dict[tuple[str, str, str], tuple[float, float]] = {}
    memory: dict[tuple[str, str, str], int] = {}
    scrape = Scrape()
    node_cpu: tuple[float, float] | None = None
    node_memory = 0
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, labels, rest = _sample(line)
        values = rest.split()
        if not values:
            continue
        value = float(values[0])
        stamp = int(values[1]) / 1000 if len(values) > 1 else scraped_at
        key = (labels.get("namespace", ""), labels.get("pod", ""), labels.get("container", ""))
        if name == "container_cpu_usage_seconds_total":
            cpu[key] = (stamp, value)
        elif name == "container_memory_working_set_bytes":
            memory[key] = int(value)
        elif name == "node_cpu_usage_seconds_total":
            node_cpu = (stamp, value)
        elif name == "node_memory_working_set_bytes":
            node_memory = int(value)
    for key, (stamp, seconds) in cpu.items():
        scrape.containers[key] = Point(stamp, seconds, memory.get(key, 0))
    if node_cpu is not None:
        scrape.node = Point(node_cpu[0], node_cpu[1], node_memory)
    return scrape


def _sample(line: str) -> tuple[str, dict[str, str], str]:
    if "{" not in line:
        name, _, rest = line.partition(" ")
        return name, {}, rest
    name, _, tail = line.partition("{")
    body, _, rest = tail.partition("}")
    labels = {}
    for part in body.split(","):
        key, _, value = part.partition("=")
        if key:
            labels[key.strip()] = value.strip().strip('"')
    return name, labels, rest


def cpu_quantity(nanocores: int) -> str:
    """resource.NewScaledQuantity(n, Nano) as it prints: the largest exact suffix."""
    for suffix, scale in (("", 10**9), ("m", 10**6), ("u", 10**3)):
        if nanocores % scale == 0:
            return f"{nanocores // scale}{suffix}"
    return f"{nanocores}n"


def memory_quantity(size: int) -> str:
    """resource.NewQuantity(bytes, BinarySI) as it prints."""
    for suffix, scale in (("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024)):
        if size and size % scale == 0:
            return f"{size // scale}{suffix}"
    return str(size)


def _rfc3339(moment: float) -> str:
    return datetime.datetime.fromtimestamp(moment, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _duration(seconds: float) -> str:
    """A metav1.Duration as Go prints it ("15s", "1.002s")."""
    text = f"{seconds:.3f}".rstrip("0").rstrip(".")
    return f"{text}s"


class MetricsServer:
    def __init__(self, api: ApiServer, client: KubeletClient,
                 settings: MetricsServerSettings) -> None:
        self.api = api
        self.client = client
        self.settings = settings
        self.nodes: dict[str, Series] = {}
        self.containers: dict[tuple[str, str, str], Series] = {}
        self._task: asyncio.Task[None] | None = None

    # ---------------------------------------------------------------------------- scraping
    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            await self.scrape_once()
            await asyncio.sleep(self.settings.resolution)

    async def scrape_once(self) -> None:
        nodes = self._stored("", "nodes")
        results = await asyncio.gather(*(self._scrape(node) for node in nodes))
        node_series: dict[str, Series] = {}
        container_series: dict[tuple[str, str, str], Series] = {}
        for node, scrape in zip(nodes, results, strict=True):
            name = str(node["metadata"]["name"])
            if scrape is None:
                continue  # as metrics-server: a node it cannot scrape has no metrics
            if scrape.node is not None:
                old = self.nodes.get(name)
                node_series[name] = old.add(scrape.node) if old else Series(scrape.node)
            for key, point in scrape.containers.items():
                series = self.containers.get(key)
                container_series[key] = series.add(point) if series else Series(point)
        self.nodes, self.containers = node_series, container_series

    async def _scrape(self, node: dict[str, Any]) -> Scrape | None:
        name = node["metadata"]["name"]
        try:
            host, port = self.client.location(node)
            reader, writer = await self.client.dial(host, port)
        except StatusError as error:
            log.debug("metrics-server: node %s: %s", name, error.message)
            return None
        try:
            writer.write(upgrade.request_bytes("GET", "/metrics/resource", f"{host}:{port}",
                                               [("Connection", "close")]))
            await writer.drain()
            raw = await asyncio.wait_for(reader.read(-1), SCRAPE_TIMEOUT)
        except (OSError, TimeoutError) as error:
            log.debug("metrics-server: node %s: %s", name, error)
            return None
        finally:
            writer.close()
        head, _, body = raw.partition(b"\r\n\r\n")
        status_line = head.split(b"\r\n", 1)[0].split()
        if len(status_line) < 2 or status_line[1] != b"200":
            log.debug("metrics-server: node %s answered %s", name, head[:100])
            return None
        if b"transfer-encoding: chunked" in head.lower():
            body = _dechunk(body)
        return parse_resource_metrics(body.decode(errors="replace"), time.time())

    def _stored(self, namespace: str, plural: str) -> list[dict[str, Any]]:
        kind = self.api.kinds.get("", "v1", plural)
        assert kind is not None
        return [stored.obj for stored in self.api.store.list(kind.storage_key, namespace)]

    # ------------------------------------------------------------------------------- API
    def pod_metrics(self, pod: dict[str, Any]) -> dict[str, Any] | None:
        metadata = pod["metadata"]
        namespace, name = metadata.get("namespace", ""), metadata["name"]
        containers = []
        stamp = window = 0.0
        for container in (pod.get("spec") or {}).get("containers") or []:
            series = self.containers.get((namespace, name, container.get("name", "")))
            usage = series.usage() if series is not None else None
            if usage is None:
                continue
            nanocores, memory, stamp, window = usage
            containers.append({"name": container["name"], "usage": {
                "cpu": cpu_quantity(nanocores), "memory": memory_quantity(memory)}})
        if not containers:
            return None
        return {"kind": "PodMetrics", "apiVersion": f"{GROUP}/{VERSION}",
                "metadata": {"name": name, "namespace": namespace,
                             "creationTimestamp": _rfc3339(time.time()),
                             "labels": metadata.get("labels") or {}},
                "timestamp": _rfc3339(stamp), "window": _duration(window),
                "containers": containers}

    def node_metrics(self, node: dict[str, Any]) -> dict[str, Any] | None:
        metadata = node["metadata"]
        series = self.nodes.get(metadata["name"])
        usage = series.usage() if series is not None else None
        if usage is None:
            return None
        nanocores, memory, stamp, window = usage
        return {"kind": "NodeMetrics", "apiVersion": f"{GROUP}/{VERSION}",
                "metadata": {"name": metadata["name"],
                             "creationTimestamp": _rfc3339(time.time()),
                             "labels": metadata.get("labels") or {}},
                "timestamp": _rfc3339(stamp), "window": _duration(window),
                "usage": {"cpu": cpu_quantity(nanocores), "memory": memory_quantity(memory)}}

    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not request.path.startswith(PREFIX + "/") or not request.path[len(PREFIX):].strip(
                "/"):
            return await handler(request)  # elsewhere, or the discovery document
        try:
            return json_response(self.serve(request[USER_KEY], request.method, request.path,
                                            request.query))
        except StatusError as error:
            return status_response(error)

    def serve(self, user: User, method: str, path: str, query: Any) -> dict[str, Any]:
        parts = path[len(PREFIX):].strip("/").split("/")
        namespace = ""
        if parts[:1] == ["namespaces"] and len(parts) >= 3:
            namespace, parts = parts[1], parts[2:]
        if not parts or parts[0] not in ("pods", "nodes") or len(parts) > 2 or (
                parts[0] == "nodes" and namespace):
            raise errors.StatusError(404, "NotFound",
                                     "the server could not find the requested resource", {})
        kind = POD_METRICS if parts[0] == "pods" else NODE_METRICS
        name = parts[1] if len(parts) == 2 else ""
        if method != "GET" or query.get("watch") in ("true", "1"):
            raise errors.method_not_supported(f"{kind.plural}.{GROUP}",
                                              "watch" if method == "GET" else method.lower())
        self.api._authorize(user, "get" if name else "list", kind, namespace, name)
        build = self.pod_metrics if kind is POD_METRICS else self.node_metrics
        source = "pods" if kind is POD_METRICS else "nodes"
        resource = f"{kind.singular}.{GROUP}"
        if name:
            found = [obj for obj in self._stored(namespace, source)
                     if obj["metadata"]["name"] == name]
            item = build(found[0]) if found else None
            if item is None:  # metrics-server names a pod by namespace/name
                raise errors.not_found(resource, f"{namespace}/{name}" if namespace else name)
            return item
        try:
            selector = parse_label_selector(str(query.get("labelSelector", "")))
        except SelectorError as error:
            raise errors.bad_request(str(error)) from None
        items = [item for obj in self._stored(namespace, source)
                 if selector.matches(obj["metadata"].get("labels"))
                 and (item := build(obj)) is not None]
        return {"kind": f"{kind.kind}List", "apiVersion": f"{GROUP}/{VERSION}",
                "metadata": {}, "items": items}


def _dechunk(body: bytes) -> bytes:
    out = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2:]
    return out


def install_metrics_server(cluster: Any, settings: MetricsServerSettings,
                           serving: bool = False) -> MetricsServer:
    """Serve metrics.k8s.io on the cluster (listed in discovery) and scrape its kubelets: once
    the cluster serves, or at once on a serving cluster (`serving`, on its loop)."""
    server = MetricsServer(cluster.api, cluster.kubelet_client, settings)
    cluster.api.kinds.announce(POD_METRICS)
    cluster.api.kinds.announce(NODE_METRICS)
    cluster.middlewares.append(server.middleware)

    async def start(_: Any) -> None:
        server.start()

    async def stop(_: Any) -> None:
        await server.stop()

    if serving:
        server.start()
    else:
        cluster.serving_hooks.append(start)
    cluster.shutdown_hooks.append(stop)
    return server


async def remove_metrics_server(cluster: Any, server: MetricsServer) -> None:
    """As when metrics-server is uninstalled: the API and its discovery are gone."""
    cluster.middlewares.remove(server.middleware)
    cluster.api.kinds.withdraw(GROUP, VERSION)
    await server.stop()
