"""The scheduler's pure decision: filters, their reasons and the Unschedulable message."""

from __future__ import annotations

from typing import Any

from kubesim.controllers.placement import (
    NodeInfo,
    choose_node,
    feasible_nodes_to_find,
    filter_node,
    pod_requests,
    tolerates,
    unschedulable_message,
)


def node(
    name: str,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "110",
    **spec: Any,
) -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": memory, "pods": pods}
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"taints": taints or [], **spec},
        "status": {"capacity": resources, "allocatable": resources},
    }


def pod(requests: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    container = {"name": "c", "image": "i", "resources": {"requests": requests or {}}}
    return {"metadata": {"name": "p"}, "spec": {"containers": [container], **spec}}


def affinity(*expressions: dict[str, Any]) -> dict[str, Any]:
    terms = [{"matchExpressions": list(expressions)}]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                             {"nodeSelectorTerms": terms}}}


def test_node_selector_must_match_every_label() -> None:
    empty = NodeInfo()
    assert filter_node(pod(nodeSelector={"zone": "a"}), node("n", {"zone": "a"}), empty) is None
    verdict = filter_node(pod(nodeSelector={"zone": "a"}), node("n", {"zone": "b"}), empty)
    assert verdict is not None
    assert verdict.reasons == ("node(s) didn't match Pod's node affinity/selector",)


def test_required_node_affinity_operators() -> None:
    labeled = node("n", {"zone": "a", "gpus": "4"})
    cases = [
        ({"key": "zone", "operator": "In", "values": ["a", "b"]}, True),
        ({"key": "zone", "operator": "In", "values": ["b"]}, False),
        ({"key": "zone", "operator": "NotIn", "values": ["b"]}, True),
        ({"key": "absent", "operator": "NotIn", "values": ["b"]}, True),
        ({"key": "zone", "operator": "Exists"}, True),
        ({"key": "zone", "operator": "DoesNotExist"}, False),
        ({"key": "absent", "operator": "DoesNotExist"}, True),
        ({"key": "gpus", "operator": "Gt", "values": ["3"]}, True),
        ({"key": "gpus", "operator": "Lt", "values": ["3"]}, False),
    ]
    for expression, fits in cases:
        verdict = filter_node(pod(affinity=affinity(expression)), labeled, NodeInfo())
        assert (verdict is None) == fits, (
            expression
        )


def test_taints_need_tolerations_for_no_schedule_and_no_execute_only() -> None:
    tainted = node("n", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}])
    verdict = filter_node(pod(), tainted, NodeInfo())
    assert verdict is not None and verdict.reasons == ("node(s) had untolerated taint {k: v}",)
    preferred = node("n", taints=[{"key": "k", "effect": "PreferNoSchedule"}])
    assert filter_node(pod(), preferred, NodeInfo()) is None
    tolerated = pod(tolerations=[{"key": "k", "operator": "Equal", "value": "v"}])
    assert filter_node(tolerated, tainted, NodeInfo()) is None


def test_toleration_matching_rules() -> None:
    taint = {"key": "k", "value": "v", "effect": "NoExecute"}
    assert tolerates({"operator": "Exists"}, taint)  # empty key + Exists tolerates everything
    assert tolerates({"key": "k", "operator": "Exists", "effect": "NoExecute"}, taint)
    assert not tolerates({"key": "k", "operator": "Exists", "effect": "NoSchedule"}, taint)
    assert not tolerates({"key": "k", "value": "other"}, taint)
    assert not tolerates({"key": "other", "operator": "Exists"}, taint)


def test_requests_count_against_allocatable_minus_bound_pods() -> None:
    small = node("n", cpu="1", memory="1Gi")
    bound = [pod({"cpu": "600m"})]
    assert filter_node(pod({"cpu": "400m"}), small, NodeInfo.of(bound)) is None
    verdict = filter_node(pod({"cpu": "500m", "memory": "2Gi"}), small, NodeInfo.of(bound))
    assert verdict is not None
    assert verdict.reasons == ("Insufficient cpu", "Insufficient memory")


def test_extended_resources_fit_like_cpu_and_a_node_without_them_has_none() -> None:
    """NodeResourcesFit's scalar resources: a GPU pod fits only a node with a GPU left, and
    one requesting more GPUs than any node has is not helped by preemption."""
    gpu_node = node("gpu")
    gpu_node["status"]["allocatable"] = {**gpu_node["status"]["allocatable"],
                                         "nvidia.com/gpu": "1", "hugepages-2Mi": "64Mi"}
    wants_gpu = pod({"cpu": "100m", "nvidia.com/gpu": "1"})
    assert filter_node(wants_gpu, gpu_node, NodeInfo()) is None
    verdict = filter_node(wants_gpu, node("plain"), NodeInfo())
    assert verdict is not None and verdict.reasons == ("Insufficient nvidia.com/gpu",)
    taken = filter_node(wants_gpu, gpu_node, NodeInfo.of([wants_gpu]))
    assert taken is not None and taken.resolvable_by_preemption
    chosen, message, _ = choose_node(pod({"nvidia.com/gpu": "2", "hugepages-2Mi": "128Mi"}),
                                     [gpu_node, node("plain")], {})
    assert chosen is None
    assert message == ("0/2 nodes are available: 2 Insufficient hugepages-2Mi, 2 Insufficient "
                       "nvidia.com/gpu. preemption: 0/2 nodes are available: 2 Preemption is "
                       "not helpful for scheduling.")


def test_init_containers_count_by_their_maximum() -> None:
    init = {"name": "i", "image": "i", "resources": {"requests": {"cpu": "2"}}}
    verdict = filter_node(pod({"cpu": "100m"}, initContainers=[init]), node("n", cpu="1"),
                          NodeInfo())
    assert verdict is not None and verdict.reasons == ("Insufficient cpu",)


def test_pod_count_limit() -> None:
    verdict = filter_node(pod(), node("n", pods="1"), NodeInfo.of([pod()]))
    assert verdict is not None and verdict.reasons == ("Too many pods",)


def test_cordoned_node_is_unschedulable() -> None:
    verdict = filter_node(pod(), node("n", unschedulable=True), NodeInfo())
    assert verdict is not None and verdict.reasons == ("node(s) were unschedulable",)


def test_unschedulable_message_has_the_real_schedulers_format() -> None:
    nodes = [
        node("a", taints=[{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]),
        node("b", cpu="1"),
        node("c", cpu="1"),
    ]
    bound = {"b": NodeInfo.of([pod({"cpu": "800m"})]), "c": NodeInfo.of([pod({"cpu": "800m"})])}
    chosen, message, processed = choose_node(pod({"cpu": "500m"}), nodes, bound)
    assert processed == 3
    assert chosen is None
    assert message == (
        "0/3 nodes are available: 1 node(s) had untolerated taint "
        "{node.kubernetes.io/unreachable: }, 2 Insufficient cpu. "
        "preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, "
        "2 No preemption victims found for incoming pod."
    )


def test_no_nodes_at_all() -> None:
    assert unschedulable_message([]) == "no nodes available to schedule pods"


def test_the_least_loaded_feasible_node_is_chosen() -> None:
    nodes = [node("a"), node("b"), node("c", {"x": "y"})]
    chosen, _, _ = choose_node(pod(), nodes, {"a": NodeInfo.of([pod()]), "b": NodeInfo()})
    assert chosen == "b"


def test_a_preferred_node_affinity_outweighs_the_load() -> None:
    nodes = [node("a"), node("b", {"type": "virtual"}), node("c", {"type": "virtual", "z": "1"})]
    loads = {"b": NodeInfo.of([pod()]), "c": NodeInfo.of([pod(), pod()])}

    def preferring(*terms: tuple[int, dict[str, Any]]) -> dict[str, Any]:
        return pod(affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": weight, "preference": {"matchExpressions": [expression]}}
            for weight, expression in terms]}})
    virtual = (10, {"key": "type", "operator": "In", "values": ["virtual"]})
    assert choose_node(pod(), nodes, loads).node == "a"
    assert choose_node(preferring(virtual), nodes, loads).node == "b"  # then the least loaded
    zone = (5, {"key": "z", "operator": "Exists"})
    assert choose_node(preferring(virtual, zone), nodes, loads).node == "c"  # weights add up


def test_the_nodes_looked_for_are_kube_schedulers_adaptive_share_of_a_large_cluster() -> None:
    # numFeasibleNodesToFind: all under 100 nodes; then 50 % less a point per 125 nodes, at
    # least 5 % and at least 100 nodes.
    assert [feasible_nodes_to_find(n) for n in (3, 99, 100, 250, 402, 1000, 5000, 6000)] == [
        3, 99, 100, 120, 188, 420, 500, 300]


def test_filtering_stops_at_enough_feasible_nodes_and_the_next_pod_goes_on_from_there() -> None:
    nodes = [node(f"n{i:03}") for i in range(402)]
    loads = {"n000": NodeInfo.of([pod()])}  # the first node has a pod already
    first = choose_node(pod(), nodes, loads)
    assert first == ("n001", "", 188)  # the least loaded of n000-n187, n188 on never filtered
    # From where the last one stopped, wrapping round past the end.
    assert choose_node(pod(), nodes, loads, start=376) == ("n001", "", 188)
    assert choose_node(pod(), nodes, loads, start=188) == ("n188", "", 188)


def test_a_pod_that_fits_nowhere_is_filtered_against_every_node() -> None:
    nodes = [node(f"n{i:03}", cpu="1") for i in range(402)]
    chosen, message, processed = choose_node(pod({"cpu": "2"}), nodes, {}, start=100)
    assert (chosen, processed) == (None, 402)
    assert message.startswith("0/402 nodes are available: 402 Insufficient cpu.")


def test_node_info_sums_the_requests_of_the_pods_it_holds() -> None:
    info = NodeInfo.of([pod({"cpu": "600m"}), pod({"cpu": "300m", "memory": "1Gi"})])
    assert info.pods == 2
    assert filter_node(pod({"cpu": "200m"}), node("n", cpu="1"), info) is not None
    info.remove(pod_requests(pod({"cpu": "600m"})))  # the scheduler's cache, a pod gone
    assert info.pods == 1
    assert filter_node(pod({"cpu": "700m"}), node("n", cpu="1"), info) is None
