"""The offloaded pods' usage, from the metrics API of the remote cluster (metrics.k8s.io
PodMetrics in the twin namespaces, which the consumer may read there): what /stats/summary and
/metrics/resource serve, so that metrics-server and `kubectl top pod` see offloaded pods.

PodMetrics give rates; a kubelet's CPU counters are cumulative, and metrics-server derives the
rate from two scrapes. So each container's CPU seconds are counted here, the last rate over
the time since the last sample. A remote without a metrics API gives no samples (never
invented zeros): the pods are then absent, as on a kubelet that cannot read its runtime."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from annex.api_errors import ApiError, error_message
from annex.kubeapi import ClusterApi
from annex.mirror import Mirror
from home_agent.twins import TwinNamespaces
from shared.forge.kubelet import ContainerUsage, pod_metrics_usage
from shared.rfc3339 import parse_rfc3339

log = logging.getLogger(__name__)


def _start_time(pod: dict[str, Any]) -> float:
    try:
        return parse_rfc3339(str((pod.get("status") or {}).get("startTime") or "")).timestamp()
    except ValueError:
        return 0.0


@dataclass(frozen=True)
class NodePods:
    """The pods bound to the agent's nodes, their ShadowPods and the twin namespaces those are
    in: the pods the kubelet APIs serve, each node's its own (`bound`)."""

    pods: Mirror
    shadow_pods: Mirror
    twins: TwinNamespaces

    def bound(self, node_name: str) -> list[dict[str, Any]]:
        """The pods bound to the node `node_name`."""
        return [pod for pod in self.pods.values() if is_bound(pod, node_name)]


def is_bound(pod: dict[str, Any], node_name: str) -> bool:
    return (pod.get("spec") or {}).get("nodeName") == node_name


class Usage:
    def __init__(self, node_pods: NodePods, remote: ClusterApi) -> None:
        self.node_pods = node_pods
        self.remote = remote
        self.started = time.time()
        self._counted: dict[tuple[str, str, str], tuple[float, float, int]] = {}
        """(namespace, pod, container) -> (sample time, CPU seconds, last nanocores)."""
        self._unavailable: set[str] = set()

    async def _pod_metrics(self, remote_namespace: str) -> list[dict[str, Any]]:
        path = f"/apis/metrics.k8s.io/v1beta1/namespaces/{remote_namespace}/pods"
        try:
            listed = await self.remote.get(path)
        except (ApiError, OSError) as error:
            if remote_namespace not in self._unavailable:
                log.info("no pod metrics from remote namespace %s: %s", remote_namespace,
                         error_message(error))
                self._unavailable.add(remote_namespace)
            return []
        self._unavailable.discard(remote_namespace)
        return list((listed or {}).get("items") or [])

    async def collect(self, node_name: str) -> list[ContainerUsage]:
        """The usage of the pods bound to the node `node_name`."""
        entries = []
        seen = set()
        node_pods = self.node_pods
        for remote_namespace in sorted(node_pods.twins.accepted_twins()):
            home_namespace = node_pods.twins.home_of(remote_namespace)
            if home_namespace is None:
                continue
            for item in await self._pod_metrics(remote_namespace):
                name = str((item.get("metadata") or {}).get("name") or "")
                pod = node_pods.pods.get((home_namespace, name))
                if (pod is None or not is_bound(pod, node_name)
                        or node_pods.shadow_pods.get((remote_namespace, name)) is None):
                    continue  # not one of this node's pods
                sampled, usage = pod_metrics_usage(item)
                for container, (nano_cores, memory) in usage.items():
                    key = (home_namespace, name, container)
                    seen.add(key)
                    entries.append(ContainerUsage(
                        home_namespace, name, str(pod["metadata"].get("uid") or ""), container,
                        sampled, nano_cores, memory, self._count(key, sampled, nano_cores),
                        _start_time(pod)))
        for key in set(self._counted) - seen:
            pod = node_pods.pods.get((key[0], key[1]))
            if pod is None or is_bound(pod, node_name):
                del self._counted[key]  # gone: a new pod of that name counts from zero
        return entries

    def _count(self, key: tuple[str, str, str], sampled: float, nano_cores: int) -> float:
        last = self._counted.get(key)
        seconds = 0.0
        if last is not None:
            last_sampled, seconds, last_rate = last
            if sampled > last_sampled:
                seconds += last_rate / 1e9 * (sampled - last_sampled)
            else:
                sampled = last_sampled
        self._counted[key] = (sampled, seconds, nano_cores)
        return seconds
