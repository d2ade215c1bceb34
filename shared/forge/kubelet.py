"""The virtual node's kubelet API, its pure part: how a request path is authorized (as kubelet's
Webhook authorizer maps paths to `nodes` subresources, pkg/kubelet/server/auth.go), which pod and
container a path names, and how a home request becomes the twin pod's request on the remote API
server (pods/log query, pods/exec|attach|portforward paths)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from shared.rfc3339 import parse_rfc3339, rfc3339

METHOD_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update",
                "PATCH": "patch", "DELETE": "delete"}
"""kubelet's server.go: the request method as an API verb."""

SUBRESOURCE_PATHS = (("/stats", "stats"), ("/metrics", "metrics"), ("/logs", "log"))
"""Paths with a `nodes` subresource of their own; every other path is `nodes/proxy`."""

STREAM_PATHS = ("/exec", "/attach", "/run", "/portForward")
"""Paths that run something in a container: `create` whatever the method. A WebSocket starts
as a GET, which a kubelet's method mapping would authorize as `get` (nodes/proxy get would
then allow exec); kube-apiserver checks `create` on WebSocket upgrades of pods/exec from v1.35
for the same reason."""

LOG_OPTIONS = ("follow", "previous", "sinceSeconds", "sinceTime", "timestamps", "tailLines",
               "limitBytes")
"""The v1.PodLogOptions a kubelet reads from the query (container comes from the path)."""

STREAM_OPTIONS = (("input", "stdin"), ("output", "stdout"), ("error", "stderr"), ("tty", "tty"))
"""exec's and attach's streams as a kubelet is asked for them (kube-apiserver's streamParams,
pkg/registry/core/pod/strategy.go: "1" under api.ExecStdinParam...; the kubelet's
remotecommand.NewOptions reads nothing else) and their names in the remote API server's
pods/exec and pods/attach, which carry them on besides `command`."""


def _is_subpath(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix.rstrip("/") + "/")


def authorization_attributes(method: str, path: str, node_name: str) -> dict[str, str]:
    """The SubjectAccessReview resourceAttributes of a request, as a kubelet asks them."""
    subresource = next((name for prefix, name in SUBRESOURCE_PATHS if _is_subpath(path, prefix)),
                       "proxy")
    verb = METHOD_VERBS.get(method.upper(), "")
    if any(_is_subpath(path, prefix) for prefix in STREAM_PATHS):
        verb = "create"
    return {"verb": verb, "version": "v1", "resource": "nodes", "subresource": subresource,
            "name": node_name}


def forbidden_message(user: str, attributes: Mapping[str, str]) -> str:
    """kubelet's answer to a request its authorizer refuses."""
    return (f"Forbidden (user={user}, verb={attributes['verb']}, "
            f"resource={attributes['resource']}, subresource={attributes['subresource']})")


@dataclass(frozen=True)
class PodRequest:
    """What a pod path names: `action` is containerLogs, exec, attach or portForward."""

    action: str
    namespace: str
    pod: str
    uid: str = ""
    container: str = ""


def parse_pod_path(path: str) -> PodRequest | None:
    """/containerLogs/{ns}/{pod}/{container}, /exec|attach/{ns}/{pod}[/{uid}]/{container},
    /portForward/{ns}/{pod}[/{uid}]; None for anything else."""
    parts = [part for part in path.split("/") if part]
    if not parts:
        return None
    action, rest = parts[0], parts[1:]
    if action == "containerLogs" and len(rest) == 3:
        return PodRequest(action, rest[0], rest[1], container=rest[2])
    if action in ("exec", "attach") and len(rest) in (3, 4):
        uid = rest[2] if len(rest) == 4 else ""
        return PodRequest(action, rest[0], rest[1], uid=uid, container=rest[-1])
    if action == "portForward" and len(rest) in (2, 3):
        return PodRequest(action, rest[0], rest[1], uid=rest[2] if len(rest) == 3 else "")
    return None


def container_names(pod: Mapping[str, Any]) -> set[str]:
    spec = pod.get("spec") or {}
    return {str(c.get("name")) for key in ("containers", "initContainers", "ephemeralContainers")
            for c in spec.get(key) or []}


def pod_not_found(request: PodRequest) -> str:
    """kubelet's message for a pod it does not run."""
    return f'pod "{request.pod}" does not exist'


def container_not_found(request: PodRequest) -> str:
    return f'container "{request.container}" not found in pod "{request.pod}"'


def remote_pod_path(remote_namespace: str, pod: str, subresource: str) -> str:
    return (f"/api/v1/namespaces/{quote(remote_namespace, safe='')}/pods/"
            f"{quote(pod, safe='')}/{subresource}")


def remote_log_query(container: str, query: Mapping[str, str]) -> dict[str, str]:
    """The twin pod's pods/log query: the container and the log options, nothing else (a
    kubelet's `tail` is the older name of tailLines, `all` meaning no limit)."""
    remote = {"container": container}
    remote.update({key: query[key] for key in LOG_OPTIONS if key in query})
    if query.get("tail"):
        remote.pop("tailLines", None)
        if query["tail"] != "all":
            remote["tailLines"] = query["tail"]
    return remote


def remote_stream_query(request: PodRequest,
                        query: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The twin pod's exec/attach/portforward query: the command words (repeated, in order),
    the streams asked for, the container, the ports; other parameters are dropped. A kubelet
    is given ports as `port` (comma-separated, repeated), the API server takes them as
    `ports`."""
    if request.action == "portForward":
        return [("ports", port) for key, value in query if key == "port"
                for port in value.split(",") if port]
    asked = {key for key, value in query if value == "1"}
    remote = [(key, value) for key, value in query if key == "command"]
    remote += [(option, "true") for param, option in STREAM_OPTIONS if param in asked]
    if request.container:
        remote.append(("container", request.container))
    return remote


def pod_list(pods: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """kubelet's /pods: the pods bound to the node, as a v1 PodList."""
    return {"kind": "PodList", "apiVersion": "v1", "metadata": {},
            "items": [dict(pod) for pod in pods]}


# --- usage: /stats/summary and /metrics/resource from the twins' PodMetrics --------------------


@dataclass(frozen=True)
class ContainerUsage:
    """One container's usage as the remote metrics API reports it, with the CPU time the
    agent has counted for it (a kubelet's counters are cumulative; PodMetrics give rates)."""

    namespace: str
    pod: str
    pod_uid: str
    container: str
    timestamp: float
    """Unix seconds of the sample."""
    nano_cores: int
    memory_bytes: int
    cpu_seconds: float
    start_time: float


def pod_metrics_usage(pod_metrics: Mapping[str, Any]) -> tuple[float, dict[str, tuple[int, int]]]:
    """(sample time in Unix seconds, container -> (nanocores, working set bytes)) of one
    metrics.k8s.io PodMetrics."""
    from shared.quantity import parse_quantity

    try:
        sampled = parse_rfc3339(str(pod_metrics.get("timestamp") or "")).timestamp()
    except ValueError:
        sampled = 0.0
    usage = {}
    for container in pod_metrics.get("containers") or []:
        values = container.get("usage") or {}
        try:
            cpu = int(parse_quantity(values.get("cpu") or "0") * 1_000_000_000)
            memory = int(parse_quantity(values.get("memory") or "0"))
        except (ValueError, ArithmeticError):
            continue
        usage[str(container.get("name"))] = (cpu, memory)
    return sampled, usage


def _rfc3339(seconds: float) -> str:
    from datetime import UTC, datetime

    return rfc3339(datetime.fromtimestamp(seconds, UTC))


def _cpu(nano_cores: int, cpu_seconds: float, at: float) -> dict[str, Any]:
    return {"time": _rfc3339(at), "usageNanoCores": nano_cores,
            "usageCoreNanoSeconds": int(cpu_seconds * 1_000_000_000)}


def _memory(working_set: int, at: float) -> dict[str, Any]:
    return {"time": _rfc3339(at), "workingSetBytes": working_set, "usageBytes": working_set}


def stats_summary(node_name: str, node_start: float, now: float,
                  usage: Sequence[ContainerUsage]) -> dict[str, Any]:
    """kubelet's /stats/summary (stats/v1alpha1 Summary) for the offloaded pods."""
    pods: dict[tuple[str, str], list[ContainerUsage]] = {}
    for entry in usage:
        pods.setdefault((entry.namespace, entry.pod), []).append(entry)
    pod_stats = []
    for (namespace, name), containers in sorted(pods.items()):
        at = max(c.timestamp for c in containers)
        pod_stats.append({
            "podRef": {"name": name, "namespace": namespace, "uid": containers[0].pod_uid},
            "startTime": _rfc3339(min(c.start_time for c in containers)),
            "containers": [{"name": c.container, "startTime": _rfc3339(c.start_time),
                            "cpu": _cpu(c.nano_cores, c.cpu_seconds, c.timestamp),
                            "memory": _memory(c.memory_bytes, c.timestamp)}
                           for c in containers],
            "cpu": _cpu(sum(c.nano_cores for c in containers),
                        sum(c.cpu_seconds for c in containers), at),
            "memory": _memory(sum(c.memory_bytes for c in containers), at),
        })
    return {"node": {"nodeName": node_name, "startTime": _rfc3339(node_start),
                     "cpu": _cpu(sum(c.nano_cores for c in usage),
                                 sum(c.cpu_seconds for c in usage), now),
                     "memory": _memory(sum(c.memory_bytes for c in usage), now)},
            "pods": pod_stats}


def _metric(name: str, kind: str, help_text: str, samples: list[str]) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *samples]


def resource_metrics(now: float, usage: Sequence[ContainerUsage]) -> str:
    """kubelet's /metrics/resource (what metrics-server scrapes): cumulative CPU seconds and
    working sets per container, pod and node, with the samples' times in milliseconds."""
    def labels(entry: ContainerUsage, container: bool = True) -> str:
        parts = ([f'container="{entry.container}"'] if container else []) + [
            f'namespace="{entry.namespace}"', f'pod="{entry.pod}"']
        return "{" + ",".join(parts) + "}"

    def ms(seconds: float) -> int:
        return int(seconds * 1000)

    pods: dict[tuple[str, str], list[ContainerUsage]] = {}
    for entry in usage:
        pods.setdefault((entry.namespace, entry.pod), []).append(entry)
    lines = [
        *_metric("container_cpu_usage_seconds_total", "counter",
                 "[STABLE] Cumulative cpu time consumed by the container in core-seconds",
                 [f"container_cpu_usage_seconds_total{labels(e)} {e.cpu_seconds:.9f} "
                  f"{ms(e.timestamp)}" for e in usage]),
        *_metric("container_memory_working_set_bytes", "gauge",
                 "[STABLE] Current working set of the container in bytes",
                 [f"container_memory_working_set_bytes{labels(e)} {e.memory_bytes} "
                  f"{ms(e.timestamp)}" for e in usage]),
        *_metric("container_start_time_seconds", "gauge",
                 "[STABLE] Start time of the container since unix epoch in seconds",
                 [f"container_start_time_seconds{labels(e)} {e.start_time:.9f} "
                  f"{ms(e.timestamp)}" for e in usage]),
        *_metric("node_cpu_usage_seconds_total", "counter",
                 "[STABLE] Cumulative cpu time consumed by the node in core-seconds",
                 [f"node_cpu_usage_seconds_total {sum(e.cpu_seconds for e in usage):.9f} "
                  f"{ms(now)}"]),
        *_metric("node_memory_working_set_bytes", "gauge",
                 "[STABLE] Current working set of the node in bytes",
                 [f"node_memory_working_set_bytes {sum(e.memory_bytes for e in usage)} "
                  f"{ms(now)}"]),
        *_metric("pod_cpu_usage_seconds_total", "counter",
                 "[STABLE] Cumulative cpu time consumed by the pod in core-seconds",
                 [f"pod_cpu_usage_seconds_total{labels(c[0], False)} "
                  f"{sum(e.cpu_seconds for e in c):.9f} {ms(max(e.timestamp for e in c))}"
                  for c in pods.values()]),
        *_metric("pod_memory_working_set_bytes", "gauge",
                 "[STABLE] Current working set of the pod in bytes",
                 [f"pod_memory_working_set_bytes{labels(c[0], False)} "
                  f"{sum(e.memory_bytes for e in c)} {ms(max(e.timestamp for e in c))}"
                  for c in pods.values()]),
        *_metric("resource_scrape_error", "gauge",
                 "[STABLE] 1 if there was an error while getting container metrics, "
                 "0 otherwise", ["resource_scrape_error 0"]),
    ]
    return "\n".join(lines) + "\n"
