"""The scheduler's decision, as pure functions over plain pod and node dicts.

Filters, their order and their reason strings follow kube-scheduler's default profile
(NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit); the Unschedulable message is
built like `FitError.Error()` in pkg/scheduler/framework/types.go, followed by DefaultPreemption's
PostFilter message (every simulated pod has priority 0, so preemption never finds victims).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, NamedTuple

from kubesim.quantity import parse_quantity

UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"
REASON_UNSCHEDULABLE_NODE = "node(s) were unschedulable"
REASON_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_TOO_MANY_PODS = "Too many pods"
PREEMPTION_NOT_HELPFUL = "Preemption is not helpful for scheduling"
PREEMPTION_NO_VICTIMS = "No preemption victims found for incoming pod"

# NodeResourcesFit checks pods first, then these in this order.
_FIT_RESOURCES = ("cpu", "memory", "ephemeral-storage")
TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class NodeVerdict:
    """Why a node was filtered out: the reasons of the first failing filter."""

    reasons: tuple[str, ...]
    resolvable_by_preemption: bool


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """core/v1 Toleration.ToleratesTaint: empty effect/key match all; Exists ignores the value."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def first_untolerated_taint(
    taints: Iterable[Mapping[str, Any]],
    tolerations: Sequence[Mapping[str, Any]],
    effects: Sequence[str] = ("NoSchedule", "NoExecute"),
) -> Mapping[str, Any] | None:
    for taint in taints:
        if taint.get("effect") not in effects:
            continue
        if not any(tolerates(toleration, taint) for toleration in tolerations):
            return taint
    return None


def _requirement_matches(requirement: Mapping[str, Any], value: str | None) -> bool:
    operator = requirement.get("operator")
    values = requirement.get("values") or []
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt"):
        try:
            have, want = int(value or ""), int(values[0])
        except (ValueError, IndexError):
            return False
        return have > want if operator == "Gt" else have < want
    return False


def _term_matches(term: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """A NodeSelectorTerm: its expressions are ANDed; a term with none matches nothing."""
    labels = node.get("metadata", {}).get("labels") or {}
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    name = node.get("metadata", {}).get("name")
    return all(_requirement_matches(r, labels.get(r.get("key"))) for r in expressions) and all(
        _requirement_matches(r, name if r.get("key") == "metadata.name" else None) for r in fields
    )


def node_selector_matches(selector: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """A NodeSelector (a volume's required node affinity, a pod's required node affinity): its
    terms are ORed."""
    return any(_term_matches(term, node) for term in selector.get("nodeSelectorTerms") or [])


def preferred_weight(pod: Mapping[str, Any], node: Mapping[str, Any]) -> int:
    """The weights of the pod's preferred node affinity terms the node matches added up (the
    NodeAffinity plugin's Score before it is normalized)."""
    preferred = (((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}).get(
        "preferredDuringSchedulingIgnoredDuringExecution") or []
    return sum(int(term.get("weight") or 0) for term in preferred
               if _term_matches(term.get("preference") or {}, node))


def matches_node_affinity(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """nodeSelector (all pairs) AND required node affinity (terms ORed)."""
    spec = pod.get("spec", {})
    labels = node.get("metadata", {}).get("labels") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
    )
    return required is None or node_selector_matches(required, node)


def pod_requests(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    """Effective requests: sum over containers, max'd with each init container, plus overhead."""
    spec = pod.get("spec", {})
    total: dict[str, Decimal] = {}
    for container in spec.get("containers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            total[name] = total.get(name, Decimal(0)) + parse_quantity(value)
    for container in spec.get("initContainers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            total[name] = max(total.get(name, Decimal(0)), parse_quantity(value))
    for name, value in (spec.get("overhead") or {}).items():
        total[name] = total.get(name, Decimal(0)) + parse_quantity(value)
    return total


def _allocatable(node: Mapping[str, Any]) -> dict[str, Decimal]:
    status = node.get("status", {})
    resources = status.get("allocatable") or status.get("capacity") or {}
    return {name: parse_quantity(value) for name, value in resources.items()}


def occupies_node(pod: Mapping[str, Any]) -> bool:
    """Pods the scheduler counts against a node: bound and not terminated."""
    return bool(pod.get("spec", {}).get("nodeName")) and (
        pod.get("status", {}).get("phase") not in TERMINAL_PHASES
    )


@dataclass
class NodeInfo:
    """What kube-scheduler's NodeInfo keeps per node: how many pods occupy it and the sum of
    their requests, updated as pods come and go (recomputing it for every decision would cost
    the scheduler time in proportion to the pods already placed)."""

    pods: int = 0
    requested: dict[str, Decimal] = field(default_factory=dict)

    @classmethod
    def of(cls, pods: Iterable[Mapping[str, Any]]) -> NodeInfo:
        info = cls()
        for pod in pods:
            info.add(pod_requests(pod))
        return info

    def add(self, requests: Mapping[str, Decimal]) -> None:
        self.pods += 1
        for name, value in requests.items():
            self.requested[name] = self.requested.get(name, Decimal(0)) + value

    def remove(self, requests: Mapping[str, Decimal]) -> None:
        self.pods -= 1
        for name, value in requests.items():
            self.requested[name] = self.requested.get(name, Decimal(0)) - value


def _fit_verdict(pod: Mapping[str, Any], node: Mapping[str, Any],
                 info: NodeInfo) -> NodeVerdict | None:
    allocatable = _allocatable(node)
    requested = info.requested
    reasons: list[str] = []
    unresolvable = False
    if "pods" in allocatable and info.pods + 1 > allocatable["pods"]:
        reasons.append(REASON_TOO_MANY_PODS)
    wanted = pod_requests(pod)
    names = [*_FIT_RESOURCES, *sorted(set(wanted) - set(_FIT_RESOURCES))]
    for name in names:
        want = wanted.get(name, Decimal(0))
        if want <= 0:
            continue
        have = allocatable.get(name, Decimal(0))
        if want > have - requested.get(name, Decimal(0)):
            reasons.append(f"Insufficient {name}")
            unresolvable = unresolvable or want > have
    if not reasons:
        return None
    return NodeVerdict(tuple(reasons), resolvable_by_preemption=not unresolvable)


def filter_node(pod: Mapping[str, Any], node: Mapping[str, Any],
                info: NodeInfo) -> NodeVerdict | None:
    """None when the pod fits the node; else the verdict of the first failing filter.

    `info` sums the pods already occupying the node (see `occupies_node`).
    """
    tolerations = pod.get("spec", {}).get("tolerations") or []
    node_spec = node.get("spec", {})
    if node_spec.get("unschedulable"):
        cordon = {"key": UNSCHEDULABLE_TAINT_KEY, "effect": "NoSchedule"}
        if not any(tolerates(t, cordon) for t in tolerations):
            return NodeVerdict((REASON_UNSCHEDULABLE_NODE,), resolvable_by_preemption=False)
    taint = first_untolerated_taint(node_spec.get("taints") or [], tolerations)
    if taint is not None:
        reason = f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
        return NodeVerdict((reason,), resolvable_by_preemption=False)
    if not matches_node_affinity(pod, node):
        return NodeVerdict((REASON_NODE_AFFINITY,), resolvable_by_preemption=False)
    return _fit_verdict(pod, node, info)


def _histogram(num_nodes: int, counts: Counter[str]) -> str:
    parts = sorted(f"{count} {reason}" for reason, count in counts.items())
    return f"0/{num_nodes} nodes are available: {', '.join(parts)}."


def rejected_by_pre_filter(num_nodes: int, why: str) -> str:
    """The message when a PreFilter plugin turned the pod away before any node was tried."""
    return (f"0/{num_nodes} nodes are available: {why}. preemption: 0/{num_nodes} nodes are "
            f"available: {num_nodes} {PREEMPTION_NOT_HELPFUL}.")


def unschedulable_message(verdicts: Sequence[NodeVerdict]) -> str:
    """The PodScheduled=False message, e.g. `0/3 nodes are available: 1 node(s) had untolerated
    taint {k: v}, 2 Insufficient cpu. preemption: 0/3 nodes are available: 1 Preemption is not
    helpful for scheduling, 2 No preemption victims found for incoming pod.`"""
    if not verdicts:
        return "no nodes available to schedule pods"
    reasons: Counter[str] = Counter()
    preemption: Counter[str] = Counter()
    for verdict in verdicts:
        reasons.update(verdict.reasons)
        preemption[
            PREEMPTION_NO_VICTIMS if verdict.resolvable_by_preemption else PREEMPTION_NOT_HELPFUL
        ] += 1
    count = len(verdicts)
    return f"{_histogram(count, reasons)} preemption: {_histogram(count, preemption)}"


MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


def feasible_nodes_to_find(num_all_nodes: int) -> int:
    """How many feasible nodes kube-scheduler looks for before it stops filtering
    (`numFeasibleNodesToFind`, percentageOfNodesToScore unset: adaptive): every node of a
    cluster under 100, else 50 % less a point for each 125 nodes (at least 5 %), at least 100.
    402 nodes: 188."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


class Placement(NamedTuple):
    node: str | None
    """The chosen node, None when none is feasible."""
    message: str
    """Why no node was chosen (the Unschedulable message), "" when one was."""
    processed: int
    """Nodes filtered: where the next decision starts (kube-scheduler's nextStartNodeIndex)."""


def choose_node(
    pod: Mapping[str, Any],
    nodes: Sequence[Mapping[str, Any]],
    info_by_node: Mapping[str, NodeInfo],
    volume_filter: Callable[[Mapping[str, Any]], str | None] = lambda _node: None,
    start: int = 0,
) -> Placement:
    """The feasible node the pod's preferred node affinity weighs most (`preferred_weight`), of
    those the one with the fewest pods, of the first `feasible_nodes_to_find` feasible nodes from
    `nodes[start]` on (wrapping round), as kube-scheduler's findNodesThatPassFilters stops
    filtering once it has found that many; or no node, and the message, once every node was
    filtered out. (kube-scheduler adds its plugins' scores up: NodeAffinity's, normalized to
    100 and weighed 2, outweighs the spread of the resource scores between two nodes with room,
    which kubesim does not model.)

    `volume_filter` is the VolumeBinding plugin's Filter (after the resource fit), giving the
    reason a node cannot take the pod's volumes."""
    wanted = feasible_nodes_to_find(len(nodes))
    feasible: list[tuple[int, int, str]] = []
    verdicts: list[NodeVerdict] = []
    for index in range(len(nodes)):
        node = nodes[(start + index) % len(nodes)]
        name = node["metadata"]["name"]
        info = info_by_node.get(name) or NodeInfo()
        verdict = filter_node(pod, node, info)
        if verdict is None and (reason := volume_filter(node)) is not None:
            verdict = NodeVerdict((reason,), resolvable_by_preemption=False)
        if verdict is None:
            feasible.append((-preferred_weight(pod, node), info.pods, name))
            if len(feasible) == wanted:
                break
        else:
            verdicts.append(verdict)
    processed = len(feasible) + len(verdicts)
    if feasible:
        return Placement(min(feasible)[2], "", processed)
    return Placement(None, unschedulable_message(verdicts), processed)
