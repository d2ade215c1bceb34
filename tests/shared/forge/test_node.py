"""shared.forge.node: the virtual Node's labels and taints, written only when they change and
never over what others own on it, and a provider's pools as nodes. (The desired node itself is
golden cases, node/; its status, test_node_status.py.)"""

from __future__ import annotations

from typing import Any

from shared.api.resource_offer import ResourceOffer
from shared.forge.node import (
    MAX_POD_ANNOTATION,
    WITHDRAWN_ANNOTATION,
    agent_nodes,
    desired_node,
    new_node,
    node_labels,
    node_metadata_patch,
    node_taints,
    offered_nodes,
    served_nodes,
    withdrawal_patch,
)
from shared.forge.node_status import Health, node_status
from shared.wellknown import POOL_LABEL, REMOTE_CLUSTER_ID_LABEL


def _node(labels: dict[str, str], extra_taints: list[dict[str, Any]]) -> dict[str, Any]:
    status = node_status({}, Health(True, ""), "r", "1.2.3.4", "liqo-r", 10250)
    node = new_node("liqo-r", labels, node_taints(extra_taints), status)
    node["metadata"]["resourceVersion"] = "7"
    return node


def test_an_unchanged_node_needs_no_patch() -> None:
    labels = node_labels("liqo-r", "r", {"region": "eu"}, {})
    assert node_metadata_patch(_node(labels, []), labels, node_taints([])) is None


def test_a_label_the_offer_dropped_is_removed_but_foreign_labels_and_taints_stay() -> None:
    before = node_labels("liqo-r", "r", {"region": "eu"}, {})
    node = _node(before, [])
    node["metadata"]["labels"]["user"] = "kept"
    node["spec"]["taints"].append({"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"})
    after = node_labels("liqo-r", "r", {}, {})
    patch = node_metadata_patch(node, after, node_taints([]))
    assert patch is not None
    assert patch["metadata"]["labels"] == {"region": None}  # "user" is not touched
    assert patch["metadata"]["resourceVersion"] == "7"
    assert "spec" not in patch  # the lifecycle taint is not ours: untouched


def test_a_removed_virtual_node_taint_goes_and_the_lifecycle_taint_stays() -> None:
    labels = node_labels("liqo-r", "r", {}, {})
    node = _node(labels, [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}])
    node["spec"]["taints"].append({"key": "node.kubernetes.io/unreachable",
                                   "effect": "NoSchedule"})
    patch = node_metadata_patch(node, labels, node_taints([]))
    assert patch is not None
    keys = [t["key"] for t in patch["spec"]["taints"]]
    assert keys == ["virtual-node.liqo.io/not-allowed", "node.kubernetes.io/unreachable"]


# --- node pools ----------------------------------------------------------------------------------

def _offer(*pools: dict[str, Any]) -> ResourceOffer:
    return ResourceOffer.model_validate({
        "metadata": {"name": "home", "namespace": "annex-tenant-home"},
        "spec": {"clusterId": "r", "consumerClusterId": "home",
                 "resources": {"cpu": "12"}, "maxPodResources": {"cpu": "8"},
                 "labels": {"region": "eu"}, "architecture": "amd64", "pools": list(pools)}})


GPU = {"name": "gpu", "nodeSelector": {"gpu": "true"}, "resources": {"cpu": "4"},
       "maxPodResources": {"cpu": "2"}, "labels": {"region": "eu", "gpu": "true"},
       "architecture": "arm64"}
GENERAL = {"name": "general", "nodeSelector": {"tier": "general"}, "resources": {"cpu": "8"},
           "labels": {"region": "eu", "tier": "general"}}


def test_an_offer_with_pools_makes_one_node_per_pool_and_one_without() -> None:
    assert offered_nodes("liqo-r", _offer(GPU, GENERAL)) == {"liqo-r-gpu": "gpu",
                                                            "liqo-r-general": "general"}
    assert offered_nodes("liqo-r", _offer()) == {"liqo-r": None}
    # The provider names its pools: one no pool could have makes no node.
    assert offered_nodes("liqo-r", _offer(GPU, {**GENERAL, "name": "../etc"})) == {
        "liqo-r-gpu": "gpu"}
    assert offered_nodes("liqo-r", None) == {"liqo-r": None}


def test_a_pool_node_has_its_pools_capacity_labels_and_platform() -> None:
    desired = desired_node("liqo-r-gpu", "r", _offer(GPU, GENERAL), None, Health(True, ""),
                           "1.2.3.4", 10250, "gpu")
    assert desired.status["capacity"] == desired.status["allocatable"] == {"cpu": "4"}
    assert desired.annotations == {MAX_POD_ANNOTATION: '{"cpu": "2"}'}
    assert desired.status["nodeInfo"]["architecture"] == "arm64"
    labels = desired.labels
    assert (labels["gpu"], labels["region"], labels[POOL_LABEL]) == ("true", "eu", "gpu")
    assert (labels["kubernetes.io/hostname"], labels["kubernetes.io/arch"]) == (
        "liqo-r-gpu", "arm64")
    whole = desired_node("liqo-r", "r", _offer(GPU, GENERAL), None, Health(True, ""),
                         "1.2.3.4", 10250)
    assert whole.status["capacity"] == {"cpu": "12"} and POOL_LABEL not in whole.labels
    assert whole.annotations == {MAX_POD_ANNOTATION: '{"cpu": "8"}'}


def test_the_agents_nodes_are_its_node_and_its_pools_labelled_as_the_provider_s() -> None:
    nodes = {"liqo-r": {REMOTE_CLUSTER_ID_LABEL: "r"},
             "liqo-r-gpu": {REMOTE_CLUSTER_ID_LABEL: "r", POOL_LABEL: "gpu"},
             "liqo-r-zone": {REMOTE_CLUSTER_ID_LABEL: "other", POOL_LABEL: "zone"},
             "liqo-r-x": {REMOTE_CLUSTER_ID_LABEL: "r", POOL_LABEL: "y"},
             "worker": {}}
    assert agent_nodes("liqo-r", "r", nodes) == {"liqo-r": None, "liqo-r-gpu": "gpu"}


def test_a_node_the_offer_no_longer_makes_is_withdrawn_and_nothing_is_without_an_offer() -> None:
    existing = {"liqo-r": None, "liqo-r-gpu": "gpu"}
    assert served_nodes("liqo-r", _offer(GENERAL), existing) == (
        {"liqo-r-general": "general"}, {"liqo-r": None, "liqo-r-gpu": "gpu"})
    assert served_nodes("liqo-r", _offer(), existing) == ({"liqo-r": None},
                                                          {"liqo-r-gpu": "gpu"})
    assert served_nodes("liqo-r", None, existing) == (existing, {})
    assert served_nodes("liqo-r", None, {}) == ({"liqo-r": None}, {})


def test_a_withdrawn_node_is_cordoned_saying_why_and_only_that_cordon_is_lifted() -> None:
    node = new_node("liqo-r-gpu", {}, node_taints([]), {})
    cordon = withdrawal_patch(node, "gone")
    assert cordon == {"metadata": {"annotations": {WITHDRAWN_ANNOTATION: "gone"}},
                      "spec": {"unschedulable": True}}
    cordoned = {**node, "metadata": {**node["metadata"], "annotations": {
        **node["metadata"]["annotations"], WITHDRAWN_ANNOTATION: "gone"}},
        "spec": {**node["spec"], "unschedulable": True}}
    assert withdrawal_patch(cordoned, "gone") is None
    assert withdrawal_patch(cordoned, None) == {
        "metadata": {"annotations": {WITHDRAWN_ANNOTATION: None}},
        "spec": {"unschedulable": None}}
    users = {**node, "spec": {**node["spec"], "unschedulable": True}}
    assert withdrawal_patch(users, None) is None, "a user's cordon stays"
