"""Extended resources and huge pages in the offer: lent only when the provider lists them, only
where nodes have them, in whole units; and what one pod can get (the largest free node)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from shared.offer import (
    free_resources,
    is_lendable_pattern,
    largest_free,
    max_pod_resources,
    share,
)


def _node(name: str, **allocatable: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {},
            "status": {"allocatable": allocatable,
                       "conditions": [{"type": "Ready", "status": "True"}]}}


GPU_NODE = _node("gpu", cpu="8", memory="32Gi", pods="110", **{
    "nvidia.com/gpu": "3", "example.com/dongle": "4", "hugepages-2Mi": "1Gi"})
PLAIN_NODE = _node("plain", cpu="4", memory="16Gi", pods="110")


def test_an_extended_resource_is_offered_only_when_listed_and_present() -> None:
    unlisted = free_resources([GPU_NODE, PLAIN_NODE], [])
    assert set(unlisted) == {"cpu", "memory", "pods", "ephemeral-storage"}
    listed = free_resources([GPU_NODE, PLAIN_NODE], [("gpu", {"nvidia.com/gpu": Decimal(1)})],
                            ["nvidia.com/gpu", "amd.com/gpu", "hugepages-*"])
    assert listed["nvidia.com/gpu"] == 2
    assert listed["hugepages-2Mi"] == 1024 ** 3
    assert "amd.com/gpu" not in listed  # no node has one: not offered, not offered as 0
    assert "example.com/dongle" not in listed


def test_a_share_of_devices_is_whole_devices_and_huge_pages_are_binary() -> None:
    free = free_resources([GPU_NODE], [], ["nvidia.com/gpu", "hugepages-2Mi"])
    offered = share(free, Decimal(50))
    assert offered["nvidia.com/gpu"] == "1"  # half of 3 GPUs is one GPU, not 1500m
    assert offered["hugepages-2Mi"] == "512Mi"
    assert offered["cpu"] == "4"


def test_what_one_pod_can_get_is_the_largest_free_node_within_the_offer() -> None:
    reservations = [("gpu", {"cpu": Decimal(7), "memory": Decimal(0)})]
    largest = largest_free([GPU_NODE, PLAIN_NODE], reservations, ["nvidia.com/gpu"])
    assert largest["cpu"] == 4  # the plain node's 4 beat the GPU node's 1 left
    offered = {"cpu": "6", "memory": "24Gi", "pods": "110", "nvidia.com/gpu": "1"}
    # cpu: the largest node's; memory and GPUs: the offer's, smaller than the GPU node's 32Gi, 3
    assert max_pod_resources(largest, offered) == {
        "cpu": "4", "memory": "24Gi", "nvidia.com/gpu": "1"}


def test_the_listable_names_are_extended_resources_and_huge_pages() -> None:
    for name in ("nvidia.com/gpu", "amd.com/gpu", "hugepages-1Gi", "hugepages-*",
                 "example.com/*"):
        assert is_lendable_pattern(name), name
    for name in ("cpu", "memory", "kubernetes.io/foo", "node.kubernetes.io/x", "gpu", "*",
                 "requests.nvidia.com/gpu", "hugepages-"):
        assert not is_lendable_pattern(name), name
