"""core/v1 NodeSelector matching against a node's labels (NamespaceOffloading.clusterSelector).

Terms are ORed, a term's requirements ANDed, as in k8s.io/component-helpers' nodeaffinity. Two
choices follow the apiserver/scheduler: a selector with no terms matches every node here (an
empty clusterSelector means "all clusters"), while a term with no requirements
matches nothing; `matchFields` can only name `metadata.name`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _integer(text: str) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def requirement_matches(requirement: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key = str(requirement.get("key", ""))
    operator = requirement.get("operator")
    values = [str(v) for v in requirement.get("values") or []]
    present = key in labels
    match operator:
        case "In":
            return present and labels[key] in values
        case "NotIn":
            return not present or labels[key] not in values
        case "Exists":
            return present
        case "DoesNotExist":
            return not present
        case "Gt" | "Lt":
            if not present or len(values) != 1:
                return False
            have, bound = _integer(labels[key]), _integer(values[0])
            if have is None or bound is None:
                return False
            return have > bound if operator == "Gt" else have < bound
    return False


def term_matches(term: Mapping[str, Any], labels: Mapping[str, str], node_name: str) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    if not all(requirement_matches(r, labels) for r in expressions):
        return False
    return all(
        r.get("key") == "metadata.name" and requirement_matches(
            {**r, "key": "metadata.name"}, {"metadata.name": node_name})
        for r in fields
    )


def node_selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str],
                          node_name: str = "") -> bool:
    """Whether a node with `labels` (and `node_name`) is selected; no terms selects every node."""
    terms = (selector or {}).get("nodeSelectorTerms") or []
    if not terms:
        return True
    return any(term_matches(term, labels, node_name) for term in terms)


def selects_a_node(selector: Mapping[str, Any] | None,
                   nodes: Mapping[str, Mapping[str, str]]) -> bool:
    """Whether the selector selects one of `nodes` (name → labels): a provider shown as one
    node per pool is selected by selecting any of them."""
    return any(node_selector_matches(selector, labels, name) for name, labels in nodes.items())
