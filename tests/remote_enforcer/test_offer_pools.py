"""The publisher's offer split into pools: each pool's entry counts its own nodes only, the
offer's totals only the pools' nodes, and a node relabelled into another pool moves the offer
(no cluster: the picture is fed as the watches feed it)."""

from __future__ import annotations

from typing import Any

from annex.informers import Change
from annex.mirror import Mirror
from remote_enforcer.offer import OfferPublisher, node_view
from remote_enforcer.settings import parse
from tests.remote_enforcer.offer_writes import OfferApi, published

POOLS = ("--offer-pool", "gpu=accelerator=nvidia", "--offer-pool", "general=tier=general")


def _node(name: str, cpu: str, **labels: str) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": "32Gi", "pods": "110"}
    if labels.get("accelerator") or name == "system":
        allocatable["nvidia.com/gpu"] = "4" if labels else "8"
    return {"metadata": {"name": name, "labels": labels}, "spec": {}, "status": {
        "allocatable": allocatable, "conditions": [{"type": "Ready", "status": "True"}],
        "nodeInfo": {"architecture": "arm64" if labels.get("accelerator") else "amd64",
                     "kubeletVersion": "v1.30.2"}}}


NODES = [_node("gpu-1", "8", accelerator="nvidia"), _node("cpu-1", "16", tier="general"),
         _node("cpu-2", "4", tier="general"), _node("system", "64")]


def _publisher(*flags: str, lent: dict[str, list[str]] | None = None) -> OfferPublisher:
    """`lent`: per consumer, the pools its Quota lends it (every pool to the others)."""
    api: Any = OfferApi()
    publisher = OfferPublisher(api, parse(["--cluster-id", "p", "--region", "eu",
                                           "--offer-extended-resources", "nvidia.com/gpu",
                                           *flags]), Mirror(), ({} if lent is None else lent).get)
    for node in NODES:
        publisher.nodes.apply("ADDED", node_view(node))
    return publisher


def test_each_pool_offers_its_own_nodes_and_the_offer_only_the_pools_nodes() -> None:
    spec = _publisher(*POOLS).spec_for("c")
    assert spec["resources"]["cpu"] == "14"  # half of 8 + 16 + 4: the system node is not lent
    # ... nor its GPUs, and what one pod can get (the agent's pod fit) is judged on the pools'
    # nodes only: the system node's 8 GPUs are no room for a pod.
    assert spec["resources"]["nvidia.com/gpu"] == "2"
    assert spec["maxPodResources"]["nvidia.com/gpu"] == "2"
    assert spec["maxPodResources"]["cpu"] == "14"
    gpu, general = spec["pools"]
    assert gpu["name"] == "gpu" and general["name"] == "general"
    assert gpu["nodeSelector"] == {"accelerator": "nvidia"}
    assert gpu["resources"]["cpu"] == "4" and gpu["resources"]["nvidia.com/gpu"] == "2"
    assert general["resources"]["cpu"] == "10"
    assert "nvidia.com/gpu" not in general["resources"]  # no node of the pool has one
    assert gpu["maxPodResources"]["cpu"] == "4"
    assert general["maxPodResources"]["cpu"] == "10"  # cpu-1's 16, within the pool's 10
    assert gpu["labels"] == {"topology.kubernetes.io/region": "eu", "accelerator": "nvidia"}
    assert gpu["architecture"] == "arm64" and general["architecture"] == "amd64"


def test_without_pools_the_offer_is_as_before() -> None:
    spec = _publisher().spec_for("c")
    assert "pools" not in spec
    assert spec["resources"]["cpu"] == "46"  # every node, the system one too
    assert spec["resources"]["nvidia.com/gpu"] == "6"


def test_a_fixed_offer_caps_each_pool_by_its_amounts() -> None:
    spec = _publisher("--offer-mode", "fixed", "--offer-resources", "cpu=12,memory=8Gi",
                      *POOLS).spec_for("c")
    gpu, general = spec["pools"]
    assert spec["resources"]["cpu"] == "12"
    assert gpu["resources"]["cpu"] == "12" and gpu["resources"]["pods"] == "110"
    assert general["resources"]["pods"] == "220"


def test_a_node_relabelled_into_a_pool_moves_the_offer() -> None:
    publisher = _publisher(*POOLS, "--offer-debounce-seconds", "0")
    assert [verb for verb, _ in published(publisher)] == ["create"]
    publisher.tenants["tenant"] = "c"
    relabelled = _node("system", "64", tier="general")
    publisher.on_node(Change("MODIFIED", node_view(relabelled), ("", "system"),
                             node_view(NODES[3])))
    assert publisher.controller.queue.take() == "tenant"  # its offer looked at again
    publisher.nodes.apply("MODIFIED", node_view(relabelled))
    after = publisher.spec_for("c")
    assert after["pools"][1]["resources"]["cpu"] == "42"
    assert published(publisher) == [("patch", after)]
    assert published(publisher) == []  # nothing moved since


def test_a_consumer_is_offered_only_the_pools_its_quota_lends_it() -> None:
    publisher = _publisher(*POOLS, lent={"c": ["general"], "none": ["tpu"]})
    spec = publisher.spec_for("c")
    assert [pool["name"] for pool in spec["pools"]] == ["general"]
    # The totals count the lent pool's nodes only: no GPU, cpu-1 and cpu-2's half.
    assert spec["resources"]["cpu"] == "10" and "nvidia.com/gpu" not in spec["resources"]
    assert spec["maxPodResources"]["cpu"] == "10"
    assert spec["architecture"] == "amd64"
    assert [pool["name"] for pool in publisher.spec_for("other")["pools"]] == ["gpu", "general"]
    nothing = publisher.spec_for("none")  # lent an undeclared pool only: nothing
    assert nothing["pools"] == [] and nothing["resources"]["cpu"] == "0"


def test_a_quota_lending_other_pools_moves_its_consumers_offer_only() -> None:
    lent: dict[str, list[str]] = {}
    publisher = _publisher(*POOLS, "--offer-debounce-seconds", "0", lent=lent)
    publisher.tenants.update({"tenant-c": "c", "tenant-d": "d"})
    for tenant, consumer in publisher.tenants.items():
        publisher.published[tenant] = publisher.spec_for(consumer)
    quota = {"metadata": {"namespace": "tenant-c", "name": "c"},
             "spec": {"consumerClusterId": "c", "pools": ["gpu"]}}
    publisher.on_quota(Change("MODIFIED", quota, ("tenant-c", "c")))
    assert len(publisher.controller.queue) == 0  # the same pools lent: nothing to look at
    lent["c"] = ["gpu"]
    publisher.on_quota(Change("MODIFIED", quota, ("tenant-c", "c")))
    assert publisher.controller.queue.take() == "tenant-c"
    assert publisher.controller.queue.take() is None  # nor the other consumer's offer
    assert [pool["name"] for pool in publisher.spec_for("c")["pools"]] == ["gpu"]
