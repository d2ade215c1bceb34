"""What a provider offers a consumer: a fixed amount, or a share of what its schedulable Ready
nodes have free (allocatable minus the requests of bound, non-terminal pods), as in Liqo's
resource offer (DESIGN.md section 6). Pure: the enforcer feeds in nodes and pods it watches.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from shared.forge.enforcement import TERMINAL_PHASES
from shared.quantity import QuantityFormat, format_quantity, parse_quantity
from shared.quota import pod_requests

OFFERED_RESOURCES = ("cpu", "memory", "pods", "ephemeral-storage")
_BINARY = {"memory", "ephemeral-storage"}


def node_is_schedulable(node: Mapping[str, Any]) -> bool:
    """Ready and not cordoned: a node the scheduler may place new pods on."""
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def node_allocatable(node: Mapping[str, Any]) -> dict[str, Decimal]:
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return {name: parse_quantity(value) for name, value in allocatable.items()
            if name in OFFERED_RESOURCES}


def allocatable_pods(nodes: Iterable[Mapping[str, Any]]) -> Decimal:
    """How many pods the schedulable nodes can hold: what a fixed offer that names no pod count
    lends (its cpu and memory are a budget, not a reason for a node of zero pods)."""
    return sum((node_allocatable(n).get("pods", Decimal(0)) for n in nodes
                if node_is_schedulable(n)), Decimal(0))


def node_platform(nodes: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The virtual node's platform from the schedulable nodes: `architecture`, the most common
    one (ties: alphabetical; pods for it mostly land where it runs), and `kubeletVersion`, the
    oldest (what every remote node offers at least). Empty while no node reports them."""
    infos = [(n.get("status") or {}).get("nodeInfo") or {} for n in nodes
             if node_is_schedulable(n)]
    platform: dict[str, str] = {}
    architectures = Counter(str(i["architecture"]) for i in infos if i.get("architecture"))
    if architectures:
        platform["architecture"] = min(architectures, key=lambda a: (-architectures[a], a))
    versions = [str(i["kubeletVersion"]) for i in infos if i.get("kubeletVersion")]
    if versions:
        platform["kubeletVersion"] = min(versions, key=_version_order)
    return platform


def _version_order(version: str) -> tuple[tuple[int, ...], str]:
    """v1.30.10 after v1.30.9; a pre-release (v1.31.0-rc.1) before its release."""
    match = re.match(r"v?(\d+(?:\.\d+)*)(.*)", version)
    if match is None:
        return (), version
    return tuple(int(p) for p in match.group(1).split(".")), match.group(2) or "~"


def pod_reservation(pod: Mapping[str, Any]) -> tuple[str, dict[str, Decimal]] | None:
    """(node, requests) of a pod that holds node resources; None if unbound or terminal."""
    node = (pod.get("spec") or {}).get("nodeName")
    if not node or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
        return None
    try:
        return node, pod_requests(pod.get("spec") or {})
    except ValueError:
        return None


def free_resources(nodes: Iterable[Mapping[str, Any]],
                   reservations: Iterable[tuple[str, Mapping[str, Decimal]]]) -> dict[str, Decimal]:
    """Per resource, what schedulable nodes have left (never below zero per node)."""
    schedulable = {(n.get("metadata") or {}).get("name"): node_allocatable(n)
                   for n in nodes if node_is_schedulable(n)}
    left = {name: dict(allocatable) for name, allocatable in schedulable.items()}
    for node, requests in reservations:
        if node in left:
            for resource, amount in requests.items():
                if resource in left[node]:
                    left[node][resource] -= amount
    total: dict[str, Decimal] = {resource: Decimal(0) for resource in OFFERED_RESOURCES}
    for per_node in left.values():
        for resource, amount in per_node.items():
            total[resource] += max(amount, Decimal(0))
    return total


def share(free: Mapping[str, Decimal], percent: Decimal) -> dict[str, str]:
    """`percent` of `free`, as canonical quantities (pods rounded down to whole pods)."""
    offered: dict[str, str] = {}
    for resource, amount in free.items():
        value = amount * percent / 100
        if resource == "pods" or resource in _BINARY:
            value = Decimal(int(value))
        else:
            value = value.quantize(Decimal("0.001"), rounding="ROUND_DOWN")
        style = QuantityFormat.BINARY_SI if resource in _BINARY else QuantityFormat.DECIMAL_SI
        offered[resource] = format_quantity(value, style)
    return offered


def differs_enough(published: Mapping[str, str], computed: Mapping[str, str],
                   threshold_percent: Decimal) -> bool:
    """True when some resource moved by more than `threshold_percent` of its published amount
    (or appeared/disappeared): smaller moves are not worth a write."""
    if published.keys() != computed.keys():
        return True
    for resource, text in computed.items():
        old, new = parse_quantity(published[resource]), parse_quantity(text)
        if old == new:
            continue
        if old == 0 or abs(new - old) * 100 > abs(old) * threshold_percent:
            return True
    return False
