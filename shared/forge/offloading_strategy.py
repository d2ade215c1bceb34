"""The pod offloading strategy, applied by the home agent's mutating webhook to pods created in
extended namespaces (DESIGN.md 4, seed 004):

- Remote: the pod tolerates the virtual-node taint and requires a virtual node
  (`liqo.io/type In virtual-node`, ANDed into each of its required node-affinity terms: terms are
  ORed, so the requirement must be in every one of them);
- LocalAndRemote: the pod tolerates the virtual-node taint, so the scheduler may pick either;
- Local: nothing (the taint keeps the pod off virtual nodes).

Idempotent: a pod that already tolerates the taint or requires a virtual node gets nothing twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.api.namespace_offloading import PodOffloadingStrategy
from shared.forge.common import copied
from shared.wellknown import (
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


def _require_virtual_node(spec: dict[str, Any]) -> None:
    affinity = spec.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    for term in terms:
        expressions = term.setdefault("matchExpressions", [])
        if VIRTUAL_NODE_REQUIREMENT not in expressions:
            expressions.append(copied(VIRTUAL_NODE_REQUIREMENT))
    required["nodeSelectorTerms"] = terms


def pod_with_offloading_strategy(pod: Mapping[str, Any], strategy: str) -> dict[str, Any]:
    """`pod` (a Pod as a dict) as the strategy wants it; the argument is never modified."""
    mutated = copied(dict(pod))
    spec = mutated.setdefault("spec", {})
    match PodOffloadingStrategy(strategy):
        case PodOffloadingStrategy.REMOTE:
            _add_toleration(spec)
            _require_virtual_node(spec)
        case PodOffloadingStrategy.LOCAL_AND_REMOTE:
            _add_toleration(spec)
        case PodOffloadingStrategy.LOCAL:
            pass
    return mutated
