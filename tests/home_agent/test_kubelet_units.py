"""The virtual node's kubelet API in the agent: who a client certificate names, and the CPU
seconds it counts from the remote metrics API's rates (home_agent/kubelet/)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from annex.mirror import Mirror
from home_agent.kubelet.auth import Caller, certificate_caller
from home_agent.kubelet.usage import NodePods, Usage


def test_a_client_certificate_names_the_user_and_groups() -> None:
    peercert = {"subject": ((("organizationName", "system:masters"),),
                            (("commonName", "kube-apiserver-kubelet-client"),))}
    assert certificate_caller(peercert) == Caller("kube-apiserver-kubelet-client",
                                                  ("system:masters",))
    assert certificate_caller({}) is None
    assert certificate_caller({"subject": ((("organizationName", "x"),),)}) is None


def _node_pods() -> NodePods:
    """Pod "p" offloaded from "ns" to its twin "twin"."""
    pods, shadow_pods = Mirror(), Mirror()
    pods.apply(None, {"metadata": {"namespace": "ns", "name": "p", "uid": "uid-p"},
                      "spec": {"nodeName": "node"}})
    shadow_pods.apply(None, {"metadata": {"namespace": "twin", "name": "p"}})
    twins: Any = SimpleNamespace(
        accepted_twins=lambda: {"twin"},
        home_of=lambda remote_namespace: "ns" if remote_namespace == "twin" else None)
    return NodePods(pods=pods, shadow_pods=shadow_pods, twins=twins)


class _MetricsApi:
    """The remote metrics API, answering the sample set last."""

    def __init__(self) -> None:
        self.sample: tuple[float, str] = (0.0, "0")

    async def get(self, path: str) -> dict[str, Any]:
        assert path == "/apis/metrics.k8s.io/v1beta1/namespaces/twin/pods"
        at, cpu = self.sample
        return {"items": [{
            "metadata": {"namespace": "twin", "name": "p"},
            "timestamp": datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z"),
            "window": "10s",
            "containers": [{"name": "web", "usage": {"cpu": cpu, "memory": "1Ki"}}]}]}


def test_cpu_seconds_are_counted_from_the_rates() -> None:
    remote = _MetricsApi()
    usage = Usage(_node_pods(), remote)  # type: ignore[arg-type]

    def counted(at: float, cpu: str) -> float:
        remote.sample = (at, cpu)
        [entry] = asyncio.run(usage.collect("node"))
        assert (entry.namespace, entry.pod, entry.pod_uid, entry.container) == (
            "ns", "p", "uid-p", "web")
        return entry.cpu_seconds

    assert counted(100.0, "500m") == 0.0
    assert counted(110.0, "1") == 5.0  # 0.5 core for 10 s
    assert counted(110.0, "1") == 5.0  # the same sample: nothing more
    assert counted(112.0, "0") == 7.0


def test_a_node_counts_only_the_pods_bound_to_it() -> None:
    """The agent's nodes share the usage (one per pool): a pod is another node's usage only,
    and another node's scrape leaves its CPU seconds counted."""
    remote = _MetricsApi()
    usage = Usage(_node_pods(), remote)  # type: ignore[arg-type]
    remote.sample = (100.0, "1")
    assert [entry.pod for entry in asyncio.run(usage.collect("node"))] == ["p"]
    remote.sample = (110.0, "1")
    assert asyncio.run(usage.collect("node-gpu")) == []
    [entry] = asyncio.run(usage.collect("node"))
    assert entry.cpu_seconds == 10.0
