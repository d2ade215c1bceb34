"""The pod webhook's mutation (`shared.forge.offloading_strategy`): the required node affinity
it builds selects exactly the nodes both the pod and the namespace allow, it is idempotent, and
the virtual nodes' not-ready toleration follows the documented rule."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.api.namespace_offloading import PodOffloadingStrategy
from shared.api.virtual_node import VirtualNode
from shared.forge.node import MAX_POD_ANNOTATION
from shared.forge.offloading_strategy import (
    NotReadyToleration,
    VirtualNodeView,
    not_ready_toleration,
    pod_with_offloading_strategy,
    too_small_for,
    virtual_node_views,
)
from shared.node_selector import node_selector_matches

EXAMPLES = settings(max_examples=1500, deadline=None, database=None)

KEYS = ["liqo.io/type", "liqo.io/remote-cluster-id", "region", "disk"]
VALUES = ["virtual-node", "a", "b", "eu"]
NODE_NAMES = ["liqo-a", "liqo-b", "worker-1"]

requirements = st.fixed_dictionaries({
    "key": st.sampled_from(KEYS),
    "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
    "values": st.lists(st.sampled_from(VALUES), min_size=1, max_size=2, unique=True),
})
field_requirements = st.fixed_dictionaries({
    "key": st.just("metadata.name"),
    "operator": st.sampled_from(["In", "NotIn"]),
    "values": st.lists(st.sampled_from(NODE_NAMES), min_size=1, max_size=2, unique=True),
})
terms = st.fixed_dictionaries({}, optional={
    "matchExpressions": st.lists(requirements, max_size=3),
    "matchFields": st.lists(field_requirements, max_size=1),
})
selectors: st.SearchStrategy[dict[str, Any]] = st.one_of(st.just({}), st.fixed_dictionaries(
    {"nodeSelectorTerms": st.lists(terms, max_size=3)}))
node_labels = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=4)
strategies = st.sampled_from([s.value for s in PodOffloadingStrategy])
not_ready = st.one_of(st.none(), st.builds(NotReadyToleration,
                                           st.one_of(st.none(), st.integers(0, 3600))))


def pod_with(selector: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "nginx"}]}
    if selector:
        spec["affinity"] = {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": selector}}
    return {"metadata": {"name": "web"}, "spec": spec}


def required_of(pod: dict[str, Any]) -> dict[str, Any] | None:
    affinity = (pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}
    required: dict[str, Any] | None = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    return required


def selects(selector: dict[str, Any] | None, labels: dict[str, str], name: str) -> bool:
    """The scheduler's reading of a pod's required node selector (absent: every node)."""
    if selector is None or not selector.get("nodeSelectorTerms"):
        return True
    return node_selector_matches(selector, labels, name)


def cluster_selects(selector: dict[str, Any], labels: dict[str, str], name: str) -> bool:
    """The clusterSelector as the webhook documents it: terms without requirements select no
    cluster and add nothing; a selector without any other term selects every cluster."""
    kept = [t for t in selector.get("nodeSelectorTerms") or []
            if t.get("matchExpressions") or t.get("matchFields")]
    return node_selector_matches({"nodeSelectorTerms": kept}, labels, name)


@EXAMPLES
@given(strategies, selectors, selectors, node_labels, st.sampled_from(NODE_NAMES))
def test_the_pod_lands_only_where_both_the_pod_and_the_namespace_allow(
        strategy: str, own: dict[str, Any], cluster_selector: dict[str, Any],
        labels: dict[str, str], name: str) -> None:
    pod = pod_with(own)
    mutated = pod_with_offloading_strategy(pod, strategy, cluster_selector)
    allowed = selects(required_of(mutated), labels, name)
    pod_allows = selects(required_of(pod), labels, name)
    virtual = labels.get("liqo.io/type") == "virtual-node"
    namespace_allows = {
        "Remote": virtual and cluster_selects(cluster_selector, labels, name),
        "LocalAndRemote": not virtual or cluster_selects(cluster_selector, labels, name),
        "Local": True,
    }[strategy]
    assert allowed == (pod_allows and namespace_allows)
    assert pod == pod_with(own), "the argument is never modified"


@EXAMPLES
@given(strategies, selectors, selectors, not_ready)
def test_the_mutation_is_idempotent(strategy: str, own: dict[str, Any],
                                    cluster_selector: dict[str, Any],
                                    toleration: NotReadyToleration | None) -> None:
    once = pod_with_offloading_strategy(pod_with(own), strategy, cluster_selector, toleration)
    assert pod_with_offloading_strategy(once, strategy, cluster_selector, toleration) == once


too_small_sets = st.lists(st.sampled_from(NODE_NAMES), max_size=3, unique=True)


@EXAMPLES
@given(strategies, selectors, selectors, node_labels, st.sampled_from(NODE_NAMES),
       too_small_sets)
def test_virtual_nodes_too_small_for_the_pod_are_left_out_of_where_it_may_land(
        strategy: str, own: dict[str, Any], cluster_selector: dict[str, Any],
        labels: dict[str, str], name: str, too_small: list[str]) -> None:
    """Every node carries its name as kubernetes.io/hostname, as virtual nodes do."""
    labels = {**labels, "kubernetes.io/hostname": name}
    before = pod_with_offloading_strategy(pod_with(own), strategy, cluster_selector)
    after = pod_with_offloading_strategy(pod_with(own), strategy, cluster_selector,
                                         too_small=too_small)
    allowed_before = selects(required_of(before), labels, name)
    allowed = selects(required_of(after), labels, name)
    if strategy == "Local":  # such pods never tolerate virtual nodes: nothing to keep off
        assert after == before
    else:
        assert allowed == (allowed_before and name not in too_small)
    assert pod_with_offloading_strategy(after, strategy, cluster_selector,
                                        too_small=too_small) == after, "idempotent"


def test_too_small_are_the_virtual_nodes_whose_largest_room_the_requests_exceed() -> None:
    views = [VirtualNodeView("liqo-a", max_pod_resources={"cpu": "1500m", "memory": "3Gi"}),
             VirtualNodeView("liqo-b", max_pod_resources={"cpu": "4", "memory": "8Gi"}),
             VirtualNodeView("liqo-c")]  # says nothing: nothing to judge by
    pod = {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "2"}}}]}}
    assert too_small_for(pod, views) == ["liqo-a"]
    gpu = {"spec": {"containers": [{"name": "train",
                                    "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}
    with_gpus = [VirtualNodeView("liqo-a", max_pod_resources={"nvidia.com/gpu": "1"}),
                 VirtualNodeView("liqo-b", max_pod_resources={"nvidia.com/gpu": "2"})]
    assert too_small_for(gpu, with_gpus) == ["liqo-a"]  # limits-only: requested at the limit
    assert too_small_for({"spec": {"containers": [{"name": "app"}]}}, views) == []
    claiming = {"metadata": {"name": "db-0"}, "spec": {**pod["spec"], "volumes": [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}]}}
    assert too_small_for(claiming, views) == []  # its volume may pin it to one of them


def test_the_views_read_what_one_pod_can_get_from_the_node_annotation() -> None:
    def annotated(name: str, text: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "labels": {"liqo.io/type": "virtual-node"},
                             "annotations": {MAX_POD_ANNOTATION: text}}}
    views = virtual_node_views([annotated("liqo-a", '{"cpu": "1500m"}'),
                                annotated("liqo-b", "not json"), annotated("liqo-c", "[1]")],
                               [])
    assert [dict(v.max_pod_resources) for v in views] == [{"cpu": "1500m"}, {}, {}]


def view(name: str, seconds: int | None, **labels: str) -> VirtualNodeView:
    return VirtualNodeView(name, {"liqo.io/type": "virtual-node",
                                  "liqo.io/remote-cluster-id": name.removeprefix("liqo-"),
                                  **labels}, seconds)


def selector_for(*clusters: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "liqo.io/remote-cluster-id", "operator": "In", "values": list(clusters)}]}]}


def test_the_longest_toleration_of_the_selected_virtual_nodes_wins() -> None:
    nodes = [view("liqo-a", 60), view("liqo-b", 600), view("liqo-c", None)]
    assert not_ready_toleration(selector_for("a", "b"), nodes) == NotReadyToleration(600)
    assert not_ready_toleration(selector_for("a"), nodes) == NotReadyToleration(60)
    # Unset is "for the whole cut": longer than any number.
    assert not_ready_toleration({}, nodes) == NotReadyToleration(None)
    assert not_ready_toleration(selector_for("a", "c"), nodes) == NotReadyToleration(None)


def test_no_selected_virtual_node_leaves_the_cluster_defaults() -> None:
    assert not_ready_toleration(selector_for("z"), [view("liqo-a", 60)]) is None
    assert not_ready_toleration({}, []) is None


def virtual_node(name: str, cluster: str, created: str, seconds: int | None,
                 node_name: str | None = None) -> VirtualNode:
    return VirtualNode.model_validate({
        "metadata": {"name": name, "namespace": "annex", "creationTimestamp": created},
        "spec": {"clusterId": cluster, "nodeName": node_name,
                 "notReadyTolerationSeconds": seconds}})


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def test_each_virtual_node_takes_the_setting_of_its_oldest_virtual_node_resource() -> None:
    nodes = [node("liqo-a", **{"liqo.io/type": "virtual-node"}),
             node("edge", **{"liqo.io/type": "virtual-node"}),
             node("liqo-flags-only", **{"liqo.io/type": "virtual-node"}),
             node("worker-1", region="eu")]
    resources = [virtual_node("newer", "a", "2024-02-01T00:00:00Z", 30),
                 virtual_node("older", "a", "2024-01-01T00:00:00Z", 90),
                 virtual_node("named", "b", "2024-01-01T00:00:00Z", 5, node_name="edge")]
    views = virtual_node_views(nodes, resources)
    assert [(v.node_name, v.not_ready_toleration_seconds) for v in views] == [
        ("edge", 5), ("liqo-a", 90), ("liqo-flags-only", None)]


def test_each_pool_node_of_a_provider_takes_its_virtual_node_resources_setting() -> None:
    pool_node = {"liqo.io/type": "virtual-node", "liqo.io/remote-cluster-id": "a"}
    nodes = [node("liqo-a-gpu", **pool_node, **{"offloading.liqo.io/pool": "gpu"}),
             node("liqo-a-cpu", **pool_node, **{"offloading.liqo.io/pool": "cpu"}),
             # named like a's pool node, but another provider's
             node("liqo-a-zone", **{"liqo.io/type": "virtual-node",
                                    "liqo.io/remote-cluster-id": "z",
                                    "offloading.liqo.io/pool": "zone"})]
    views = virtual_node_views(nodes, [virtual_node("a", "a", "2024-01-01T00:00:00Z", 90)])
    assert [(v.node_name, v.not_ready_toleration_seconds) for v in views] == [
        ("liqo-a-cpu", 90), ("liqo-a-gpu", 90), ("liqo-a-zone", None)]
