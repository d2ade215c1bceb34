"""What a provider tells a consumer about its nodes in the offer: their platform (architecture,
kubelet version) and, for a fixed offer that names no pod count, how many pods they hold."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from shared.offer import allocatable_pods, node_platform, pod_shortfalls


def _node(name: str, *, arch: str = "amd64", version: str = "v1.30.2", pods: str = "110",
          ready: bool = True, cordoned: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"unschedulable": cordoned},
            "status": {"allocatable": {"cpu": "4", "pods": pods},
                       "conditions": [{"type": "Ready", "status": str(ready)}],
                       "nodeInfo": {"architecture": arch, "kubeletVersion": version}}}


def test_the_most_common_architecture_and_the_oldest_kubelet_of_schedulable_nodes() -> None:
    nodes = [_node("a", arch="arm64", version="v1.30.10"),
             _node("b", arch="arm64", version="v1.30.9"),
             _node("c", arch="amd64", version="v1.31.0"),
             _node("d", arch="s390x", version="v1.28.0", ready=False),
             _node("e", arch="s390x", version="v1.28.0", cordoned=True),
             _node("f", arch="s390x", version="v1.28.0", cordoned=True)]
    assert node_platform(nodes) == {"architecture": "arm64", "kubeletVersion": "v1.30.9"}


def test_a_tie_is_broken_alphabetically_and_a_release_candidate_is_older() -> None:
    nodes = [_node("a", arch="arm64", version="v1.31.0"),
             _node("b", arch="amd64", version="v1.31.0-rc.1")]
    assert node_platform(nodes) == {"architecture": "amd64", "kubeletVersion": "v1.31.0-rc.1"}


def test_without_schedulable_nodes_nothing_is_told() -> None:
    assert node_platform([]) == {}
    assert node_platform([_node("a", ready=False)]) == {}


def test_the_pods_schedulable_nodes_hold() -> None:
    nodes = [_node("a", pods="110"), _node("b", pods="250"), _node("c", ready=False)]
    assert allocatable_pods(nodes) == Decimal(360)
    assert allocatable_pods([]) == Decimal(0)


def test_what_of_a_pods_requests_one_pod_cannot_get_is_named_per_resource() -> None:
    most = {"cpu": "1500m", "memory": "3Gi", "nvidia.com/gpu": "1"}
    assert pod_shortfalls({"containers": [
        {"name": "app", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}},
        {"name": "side", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}]}, most) == [
        "cpu 2 > 1500m", "memory 4Gi > 3Gi"]
    # init containers run one at a time: the largest counts, not their sum
    assert pod_shortfalls({"initContainers": [
        {"name": "a", "resources": {"requests": {"cpu": "1"}}},
        {"name": "b", "resources": {"requests": {"cpu": "1"}}}],
        "containers": [{"name": "app"}]}, most) == []
    # a sidecar keeps running beside the containers
    assert pod_shortfalls({"initContainers": [
        {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}],
        "containers": [{"name": "app", "resources": {"requests": {"cpu": "1"}}}]}, most) == [
        "cpu 2 > 1500m"]
    assert pod_shortfalls({"containers": [
        {"name": "train", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}, most) == [
        "nvidia.com/gpu 2 > 1"]
    # what the node does not say is not judged; nor is a quantity the API server would refuse
    assert pod_shortfalls({"containers": [
        {"name": "app", "resources": {"requests": {"example.com/dongle": "9"}}}]}, most) == []
    assert pod_shortfalls({"containers": [
        {"name": "app", "resources": {"requests": {"cpu": "lots"}}}]}, most) == []
    assert pod_shortfalls({"containers": [{"name": "app"}]}, {}) == []
