"""Cluster selectors written as Kubernetes label selectors (liqoctl's `--selector`), turned into
the NodeSelector a NamespaceOffloading's clusterSelector holds.

One selector string is one NodeSelectorTerm (its requirements ANDed); several selectors are
several terms (ORed), as liqoctl does. The grammar is labels.Parse's: `k=v`, `k==v`, `k!=v`,
`k in (a,b)`, `k notin (a,b)`, `k` (exists), `!k` (does not exist).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET = re.compile(rf"^(?P<key>{_KEY})\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)$")
_EQUALITY = re.compile(rf"^(?P<key>{_KEY})\s*(?P<op>==|=|!=)\s*(?P<value>{_VALUE})$")
_EXISTS = re.compile(rf"^(?P<not>!?)\s*(?P<key>{_KEY})$")
_VALID_VALUE = re.compile(rf"^{_VALUE}$")


def _requirements(selector: str) -> list[str]:
    """Split on the commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [part.strip() for part in parts if part.strip()]


def _requirement(text: str) -> dict[str, Any]:
    if match := _SET.match(text):
        values = [v.strip() for v in match["values"].split(",") if v.strip()]
        if not values or not all(_VALID_VALUE.match(v) for v in values):
            raise ValueError(f"invalid values in {text!r}")
        operator = "In" if match["op"] == "in" else "NotIn"
        return {"key": match["key"], "operator": operator, "values": values}
    if match := _EQUALITY.match(text):
        operator = "NotIn" if match["op"] == "!=" else "In"
        return {"key": match["key"], "operator": operator, "values": [match["value"]]}
    if match := _EXISTS.match(text):
        operator = "DoesNotExist" if match["not"] else "Exists"
        return {"key": match["key"], "operator": operator}
    raise ValueError(f"cannot parse {text!r} as a label selector requirement")


def cluster_selector(selectors: Iterable[str]) -> dict[str, Any]:
    """The clusterSelector for the given selectors; {} (every cluster) when there are none.
    ValueError names the requirement that does not parse."""
    terms = []
    for selector in selectors:
        requirements = [_requirement(text) for text in _requirements(selector)]
        if requirements:
            terms.append({"matchExpressions": requirements})
    return {"nodeSelectorTerms": terms} if terms else {}
