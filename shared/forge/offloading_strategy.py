"""The pod offloading strategy, applied by the home agent's mutating webhook to pods created in
extended namespaces:

- Remote: the pod tolerates the virtual-node taint and requires a virtual node the namespace's
  clusterSelector selects (each selector term ANDed with `liqo.io/type In virtual-node`);
- LocalAndRemote: the pod tolerates the virtual-node taint; with a clusterSelector it requires a
  selected virtual node or a local one (the selector's terms plus `liqo.io/type NotIn
  virtual-node`);
- Local: nothing (the taint keeps the pod off virtual nodes).

The required node selector is combined with the pod's own as Liqo's webhook does: terms are
ORed, so each of the pod's terms is ANDed with each imposed term. Unlike Liqo, `matchFields` are
combined too, and a combined term that another one already covers is left out, which also makes
the mutation idempotent. A selector term without requirements selects no cluster (see
`shared.node_selector`) and so adds nothing to the OR; a selector made only of such terms
steers nothing (no cluster is extended: the agents report NoClusterSelected).

Virtual-node health: a NotReady virtual node is tainted `node.kubernetes.io/not-ready:NoExecute`
(or `unreachable`), and the DefaultTolerationSeconds admission plugin, which runs before
webhooks, gives every pod a 300 s toleration of both: after 300 s of a cut the taint manager
would evict the home pods, their controllers replace them and the agent delete the remote pods
on reconnection. So pods that may run on a virtual node get the
VirtualNode's `notReadyTolerationSeconds` instead: their NoExecute tolerations of both keys are
replaced by ours, without tolerationSeconds (tolerate for the whole cut, the default) or with
the configured value. When the namespace may use several virtual nodes, the longest of their
values wins (unset counts as the longest): a pod is never evicted sooner than a virtual node it
may run on asks. Pods that can only run on local nodes keep the cluster's defaults.

Virtual nodes too small for the pod: a virtual node's allocatable is the sum of its provider's
nodes, so the scheduler may bind a pod there that no single provider node can run (its
`offloading.liqo.io/max-pod-resources` says what one pod can get). Such virtual nodes are kept
out of the pod's required node affinity by name (`kubernetes.io/hostname NotIn [...]`, ANDed with
every term), so that the scheduler places it elsewhere, or leaves it Pending at home saying so,
instead of binding it where it cannot run. Judged at creation, against what the virtual nodes
said then: a pod the agent gives back to its controller (`shared.offer.pod_shortfalls`) comes
back as a new pod, judged again.

Functions never modify their arguments.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shared.api.namespace_offloading import PodOffloadingStrategy
from shared.api.virtual_node import VirtualNode
from shared.forge.json_copy import copied
from shared.forge.node import agent_nodes, labels_by_name, max_pod_resources_of
from shared.forge.persistentvolume import pod_claim_names
from shared.node_selector import node_selector_matches
from shared.offer import pod_shortfalls
from shared.wellknown import (
    HOSTNAME_LABEL,
    TYPE_LABEL,
    TYPE_VIRTUAL_NODE,
    VIRTUAL_NODE_TAINT_EFFECT,
    VIRTUAL_NODE_TAINT_KEY,
)

VIRTUAL_NODE_TOLERATION: dict[str, str] = {
    "key": VIRTUAL_NODE_TAINT_KEY,
    "operator": "Exists",
    "effect": VIRTUAL_NODE_TAINT_EFFECT,
}
VIRTUAL_NODE_REQUIREMENT: dict[str, Any] = {
    "key": TYPE_LABEL,
    "operator": "In",
    "values": [TYPE_VIRTUAL_NODE],
}
LOCAL_NODE_REQUIREMENT: dict[str, Any] = {
    "key": TYPE_LABEL,
    "operator": "NotIn",
    "values": [TYPE_VIRTUAL_NODE],
}
NOT_READY_TAINT_KEY = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT_KEY = "node.kubernetes.io/unreachable"
NODE_HEALTH_TAINT_KEYS = (NOT_READY_TAINT_KEY, UNREACHABLE_TAINT_KEY)


# --- tolerations --------------------------------------------------------------------------------


@dataclass(frozen=True)
class NotReadyToleration:
    """How long pods tolerate their virtual node being not-ready or unreachable: `seconds`
    None tolerates it for as long as it lasts."""

    seconds: int | None = None

    def tolerations(self) -> list[dict[str, Any]]:
        extra = {} if self.seconds is None else {"tolerationSeconds": self.seconds}
        return [{"key": key, "operator": "Exists", "effect": "NoExecute", **extra}
                for key in NODE_HEALTH_TAINT_KEYS]


def is_node_health_toleration(toleration: Mapping[str, Any]) -> bool:
    """A toleration of the not-ready / unreachable NoExecute taints by their key (what
    DefaultTolerationSeconds adds; its empty effect tolerates NoExecute too)."""
    return (toleration.get("key") in NODE_HEALTH_TAINT_KEYS
            and toleration.get("effect") in ("NoExecute", "", None))


def _tolerates_virtual_node(toleration: Mapping[str, Any]) -> bool:
    """Whether `toleration` already tolerates the virtual-node taint (Toleration.ToleratesTaint
    with the taint's own key, value and effect)."""
    key = toleration.get("key")
    operator = toleration.get("operator") or "Equal"
    effect = toleration.get("effect")
    if effect and effect != VIRTUAL_NODE_TAINT_EFFECT:
        return False
    if operator == "Exists":
        return not key or key == VIRTUAL_NODE_TAINT_KEY
    return key == VIRTUAL_NODE_TAINT_KEY and toleration.get("value") == "true"


def _add_toleration(spec: dict[str, Any]) -> None:
    tolerations = spec.get("tolerations") or []
    if not any(_tolerates_virtual_node(t) for t in tolerations):
        spec["tolerations"] = [*tolerations, dict(VIRTUAL_NODE_TOLERATION)]


def _set_not_ready_toleration(spec: dict[str, Any], toleration: NotReadyToleration) -> None:
    # The taint manager uses the first toleration matching a taint: ours replace the others.
    kept = [t for t in spec.get("tolerations") or [] if not is_node_health_toleration(t)]
    spec["tolerations"] = [*kept, *toleration.tolerations()]


@dataclass(frozen=True)
class VirtualNodeView:
    """A virtual node as the webhook sees it: its Node's name and labels, the
    `notReadyTolerationSeconds` of its VirtualNode (None when unset or without one) and what
    one pod can get there (empty: not said)."""

    node_name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    not_ready_toleration_seconds: int | None = None
    max_pod_resources: Mapping[str, str] = field(default_factory=dict)


def virtual_node_views(nodes: Iterable[Mapping[str, Any]],
                       virtual_nodes: Iterable[VirtualNode]) -> list[VirtualNodeView]:
    """The home cluster's virtual nodes (Nodes labelled `liqo.io/type=virtual-node`), each with
    the setting of the VirtualNode naming it (the oldest, as the agent picks it): its node, or
    each of its provider's pools' nodes."""
    nodes = list(nodes)
    labels_of = labels_by_name(nodes)
    ordered = sorted(virtual_nodes, key=lambda vn: (
        str(vn.metadata.creation_timestamp or ""), vn.metadata.namespace or "",
        vn.metadata.name or ""))
    settings: dict[str, int | None] = {}
    for virtual_node in ordered:
        node_name = virtual_node.spec.effective_node_name()
        for name in {node_name, *agent_nodes(node_name, virtual_node.spec.cluster_id,
                                             labels_of)}:
            settings.setdefault(name, virtual_node.spec.not_ready_toleration_seconds)
    views = []
    for node in nodes:
        metadata = node.get("metadata") or {}
        labels = dict(metadata.get("labels") or {})
        if labels.get(TYPE_LABEL) != TYPE_VIRTUAL_NODE:
            continue
        name = str(metadata.get("name") or "")
        views.append(VirtualNodeView(name, labels, settings.get(name), max_pod_resources_of(node)))
    return sorted(views, key=lambda view: view.node_name)


def too_small_for(pod: Mapping[str, Any], virtual_nodes: Iterable[VirtualNodeView]
                  ) -> list[str]:
    """The virtual nodes where no provider node has room for the pod's requests, by name. None
    for a pod mounting claims: a claim's volume may be on one of those providers and pin the
    pod there, where it waits for the room."""
    spec = pod.get("spec") or {}
    if pod_claim_names(pod):
        return []
    return [view.node_name for view in virtual_nodes
            if pod_shortfalls(spec, view.max_pod_resources)]


def not_ready_toleration(cluster_selector: Mapping[str, Any] | None,
                         virtual_nodes: Iterable[VirtualNodeView]) -> NotReadyToleration | None:
    """The toleration for pods of a namespace with this clusterSelector: the longest setting of
    the virtual nodes it selects (unset is the longest); None when it selects none."""
    selector = {"nodeSelectorTerms": _selector_terms(cluster_selector)}
    seconds = [view.not_ready_toleration_seconds for view in virtual_nodes
               if node_selector_matches(selector, view.labels, view.node_name)]
    if not seconds:
        return None
    if any(value is None for value in seconds):
        return NotReadyToleration()
    return NotReadyToleration(max(value for value in seconds if value is not None))


# --- node affinity ------------------------------------------------------------------------------


def _selector_terms(cluster_selector: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The clusterSelector's terms that select something (a term without requirements selects
    no cluster: in an OR it adds nothing)."""
    return [copied(dict(term)) for term in (cluster_selector or {}).get("nodeSelectorTerms") or []
            if term.get("matchExpressions") or term.get("matchFields")]


def _canonical(requirement: Mapping[str, Any]) -> str:
    return json.dumps(requirement, sort_keys=True)


def _requirements(term: Mapping[str, Any]) -> frozenset[tuple[str, str]]:
    return frozenset((kind, _canonical(r)) for kind in ("matchExpressions", "matchFields")
                     for r in term.get(kind) or [])


def _and(term: Mapping[str, Any], other: Mapping[str, Any]) -> dict[str, Any]:
    """Both terms' requirements in one term (those of `term` first, none twice)."""
    combined = copied(dict(term))
    for kind in ("matchExpressions", "matchFields"):
        for requirement in other.get(kind) or []:
            present = combined.get(kind) or []
            if _canonical(requirement) not in {_canonical(r) for r in present}:
                combined[kind] = [*present, copied(dict(requirement))]
    return combined


def _without_covered_terms(terms: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The terms but those another one covers: a term whose requirements include all of another
    term's matches a subset of its nodes, so the OR does not need it (the first of equal terms
    stays). A term without requirements matches nothing and covers nothing."""
    sets = [_requirements(term) for term in terms]
    kept = []
    for index, term in enumerate(terms):
        covered = any(
            other and (other < sets[index] or (other == sets[index] and position < index))
            for position, other in enumerate(sets) if position != index)
        if not covered:
            kept.append(term)
    return kept


def merged_node_selector_terms(terms: Sequence[Mapping[str, Any]],
                               imposed: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """(A or B) and (C or D) as nodeSelectorTerms: A+C, A+D, B+C, B+D; no pod terms means the
    imposed ones alone. A pod term without requirements matches nothing and stays as it is."""
    if not terms:
        return _without_covered_terms([copied(dict(term)) for term in imposed])
    merged = []
    for term in terms:
        if not (term.get("matchExpressions") or term.get("matchFields")):
            merged.append(copied(dict(term)))
            continue
        merged.extend(_and(term, other) for other in imposed)
    return _without_covered_terms(merged)


def imposed_node_selector_terms(strategy: PodOffloadingStrategy,
                                cluster_selector: Mapping[str, Any] | None
                                ) -> list[dict[str, Any]] | None:
    """The nodeSelectorTerms the strategy and the clusterSelector require (None: nothing)."""
    selected = _selector_terms(cluster_selector)
    match strategy:
        case PodOffloadingStrategy.REMOTE:
            return [_and(term, {"matchExpressions": [VIRTUAL_NODE_REQUIREMENT]})
                    for term in selected or [{}]]
        case PodOffloadingStrategy.LOCAL_AND_REMOTE:
            if not selected:
                return None
            return [*selected, {"matchExpressions": [copied(LOCAL_NODE_REQUIREMENT)]}]
        case PodOffloadingStrategy.LOCAL:
            return None


def _require(spec: dict[str, Any], imposed: list[dict[str, Any]]) -> None:
    affinity = spec.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    required["nodeSelectorTerms"] = merged_node_selector_terms(
        required.get("nodeSelectorTerms") or [], imposed)


# --- the whole mutation -------------------------------------------------------------------------


def kept_off(node_names: Sequence[str]) -> dict[str, Any]:
    """The node selector term keeping a pod off these nodes."""
    return {"matchExpressions": [
        {"key": HOSTNAME_LABEL, "operator": "NotIn", "values": sorted(node_names)}]}


def pod_with_offloading_strategy(pod: Mapping[str, Any], strategy: str,
                                 cluster_selector: Mapping[str, Any] | None = None,
                                 not_ready: NotReadyToleration | None = None,
                                 too_small: Sequence[str] = ()) -> dict[str, Any]:
    """`pod` (a Pod as a dict) as the strategy, the namespace's clusterSelector and the
    virtual nodes' health toleration (None: the pod's tolerations of it stay) want it, kept off
    the virtual nodes `too_small` names (`too_small_for`)."""
    mutated = copied(dict(pod))
    spec = mutated.setdefault("spec", {})
    chosen = PodOffloadingStrategy(strategy)
    if chosen == PodOffloadingStrategy.LOCAL:
        return mutated
    _add_toleration(spec)
    if not_ready is not None:
        _set_not_ready_toleration(spec, not_ready)
    imposed = imposed_node_selector_terms(chosen, cluster_selector)
    if imposed is not None:
        _require(spec, imposed)
    if too_small:
        _require(spec, [kept_off(too_small)])
    return mutated
