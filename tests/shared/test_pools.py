"""Node pools' pure rules: parsing `--offer-pool`, which nodes a pool holds, which ShadowPods
name a pool they may, and the remote pod's affinity narrowed to its pool, never widened."""

from __future__ import annotations

from typing import Any

import pytest

from shared.forge.enforcement import desired_pod
from shared.node_selector import node_selector_matches
from shared.pools import (
    Pool,
    check_pools,
    lent_pools,
    parse_pool,
    placed,
    placement,
    pool_problem,
    undeclared_pools,
)

GPU = Pool("gpu", (("accelerator", "nvidia"),))
ZONE_A = Pool("zone-a", (("topology.kubernetes.io/zone", "a"), ("tier", "general")))
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def _node(**labels: str) -> dict[str, Any]:
    return {"metadata": {"name": "n", "labels": labels}}


def _terms(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return spec["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"]  # type: ignore[no-any-return]


def test_a_pool_is_parsed_from_its_flag_and_bad_ones_are_named() -> None:
    assert parse_pool("zone-a=topology.kubernetes.io/zone=a,tier=general") == ZONE_A
    assert parse_pool("gpu=accelerator=nvidia") == GPU
    for text, said in (("GPU=a=b", "'GPU'"), ("gpu", "'' is not KEY=VALUE"),
                       ("gpu=accelerator", "'accelerator' is not KEY=VALUE"),
                       ("a-very-long-pool-name-indeed=a=b", "at most 20")):
        with pytest.raises(ValueError, match=said):
            parse_pool(text)
    with pytest.raises(ValueError, match="repeat"):
        check_pools([GPU, GPU])


def test_a_pool_holds_the_nodes_whose_labels_hold_every_pair() -> None:
    assert GPU.holds(_node(accelerator="nvidia", other="x"))
    assert not GPU.holds(_node(accelerator="amd"))
    assert not ZONE_A.holds(_node(**{"topology.kubernetes.io/zone": "a"}))
    assert ZONE_A.nodes([_node(**{"topology.kubernetes.io/zone": "a", "tier": "general"}),
                         _node(tier="general")]) == [
        _node(**{"topology.kubernetes.io/zone": "a", "tier": "general"})]


def test_a_shadowpod_names_a_declared_pool_or_none_and_keeps_it() -> None:
    def named(pool: str | None) -> dict[str, Any]:
        return {"spec": {"pod": {}, "pool": pool}}

    assert pool_problem([GPU, ZONE_A], named("gpu")) is None
    assert pool_problem([GPU, ZONE_A], named(None)) is None
    assert pool_problem([GPU, ZONE_A], named("zone-b")) == (
        "spec.pool: Unsupported value 'zone-b': this provider's pools are gpu, zone-a")
    assert pool_problem([], named("gpu")) == (
        "spec.pool: Unsupported value 'gpu': this provider's pools are none")
    assert pool_problem([GPU, ZONE_A], named("zone-a"), named("gpu")) == (
        "spec.pool: Forbidden: the pool of a ShadowPod cannot change")
    assert pool_problem([GPU], named("gpu"), named("gpu")) is None
    # A pool withdrawn since: its ShadowPods' updates (labels, images) still go through.
    assert pool_problem([ZONE_A], named("gpu"), named("gpu")) is None


def test_a_consumer_lent_some_pools_names_one_of_those_or_none() -> None:
    def named(pool: str | None) -> dict[str, Any]:
        return {"spec": {"pod": {}, "pool": pool}}

    assert lent_pools([GPU, ZONE_A], None) == [GPU, ZONE_A]
    assert lent_pools([GPU, ZONE_A], ["zone-a", "zone-b"]) == [ZONE_A]
    assert undeclared_pools([GPU, ZONE_A], ["zone-a", "zone-b"]) == ["zone-b"]
    assert undeclared_pools([GPU], None) == []
    assert pool_problem([GPU, ZONE_A], named("zone-a"), lent=["zone-a"]) is None
    assert pool_problem([GPU, ZONE_A], named(None), lent=["zone-a"]) is None
    assert pool_problem([GPU, ZONE_A], named("gpu"), lent=["zone-a"]) == (
        "spec.pool: Forbidden: pool 'gpu' is not lent to this consumer (its Quota's "
        "spec.pools: zone-a)")
    assert pool_problem([GPU, ZONE_A], named("zone-b"), lent=["zone-a"]) == (
        "spec.pool: Unsupported value 'zone-b': this provider's pools are gpu, zone-a")
    # Lent no pool the provider has: a pod would have no pool to be put in, refused even
    # naming none (it would otherwise run anywhere).
    assert pool_problem([GPU], named(None), lent=["zone-b"]) == (
        "spec.pool: Forbidden: this consumer is lent none of this provider's pools (its "
        "Quota's spec.pools: zone-b)")
    # Its ShadowPods' updates keep the pool they had, lent or no longer.
    assert pool_problem([GPU, ZONE_A], named("gpu"), named("gpu"), lent=["zone-a"]) is None
    # A provider without pools: nothing to lend, nothing refused.
    assert pool_problem([], named(None), lent=["gpu"]) is None


def test_a_pod_without_affinity_gets_its_pools_and_nothing_else() -> None:
    assert placement([GPU, ZONE_A], "gpu") == [GPU]
    assert placement([GPU, ZONE_A], None) == [GPU, ZONE_A]
    assert placement([], None) == []
    assert placement([GPU, ZONE_A], "withdrawn") == [GPU, ZONE_A]  # never wider than the pools
    spec = {"containers": [{"name": "c"}]}
    assert placed(spec, []) == spec
    terms = _terms(placed(spec, [GPU]))
    assert terms == [{"matchExpressions": [
        {"key": "accelerator", "operator": "In", "values": ["nvidia"]}]}]
    assert spec == {"containers": [{"name": "c"}]}  # the input is left alone
    # Naming no pool: some pool's nodes, one term per pool.
    assert len(_terms(placed(spec, [GPU, ZONE_A]))) == 2


def test_the_pods_own_affinity_is_anded_with_its_pool_never_replaced() -> None:
    wide = {"affinity": {"nodeAffinity": {
        REQUIRED: {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "accelerator", "operator": "Exists"}]},
            {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [
                {"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}}
    spec = placed(wide, [GPU])
    selector = spec["affinity"]["nodeAffinity"][REQUIRED]
    # What the scheduler will match: a node of the GPU pool that also meets the pod's own
    # terms, and nothing outside the pool whatever the pod asked.
    assert node_selector_matches(selector, {"accelerator": "nvidia"})
    assert node_selector_matches(selector, {"accelerator": "nvidia", "disk": "ssd"})
    assert not node_selector_matches(selector, {"disk": "ssd"})
    assert not node_selector_matches(selector, {"accelerator": "amd"})
    assert len(selector["nodeSelectorTerms"]) == 2
    assert spec["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] \
        == wide["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]


def test_the_enforcers_pod_runs_in_its_shadowpods_pool() -> None:
    shadowpod = {"metadata": {"name": "p", "namespace": "t", "uid": "u"},
                 "spec": {"pool": "zone-a", "pod": {"containers": [{"name": "c"}]}}}
    pod = desired_pod(shadowpod, [GPU, ZONE_A])
    selector = pod["spec"]["affinity"]["nodeAffinity"][REQUIRED]
    assert node_selector_matches(selector, {"topology.kubernetes.io/zone": "a",
                                            "tier": "general"})
    assert not node_selector_matches(selector, {"accelerator": "nvidia"})
    assert "pool" not in pod["spec"]
    assert "affinity" not in desired_pod(shadowpod)["spec"]  # a provider without pools
