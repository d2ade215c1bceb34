"""What a provider offers a consumer: a fixed amount, or a share of what its schedulable Ready
nodes have free (allocatable minus the requests of bound, non-terminal pods), as in Liqo's
resource offer. Pure: the enforcer feeds in nodes and pods it watches.

Besides cpu, memory, pods and ephemeral-storage, the nodes' extended resources (`nvidia.com/gpu`,
any `<domain>/<name>` a device plugin advertises) and huge pages (`hugepages-2Mi`) are offered
only when the provider lists them (`lent`): a device is the provider's to lend or keep, and a
provider that never named one lends none. A listed resource no schedulable node has is not
offered at all, as a node without the device plugin does not list it.

`max_pod_resources` is what one pod can get: per resource, the most one node has free, never
above the offer. A pod asking more than that is bound to fail remote scheduling however much the
offer adds up to; the virtual node says so (shared.forge.node).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from shared.quantity import QuantityFormat, format_quantity, parse_quantity
from shared.quota import pod_requests
from shared.wellknown import TERMINAL_PHASES

OFFERED_RESOURCES = ("cpu", "memory", "pods", "ephemeral-storage")
_BINARY = {"memory", "ephemeral-storage"}


def node_is_schedulable(node: Mapping[str, Any]) -> bool:
    """Ready and not cordoned: a node the scheduler may place new pods on."""
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def is_lendable_extended(name: str) -> bool:
    """An extended resource (`<domain>/<name>` outside kubernetes.io, as IsExtendedResourceName
    says) or huge pages: what `--offer-extended-resources` may list."""
    if name.startswith("hugepages-"):
        return len(name) > len("hugepages-")
    domain, slash, rest = name.partition("/")
    return (bool(slash) and bool(domain) and bool(rest) and "/" not in rest
            and not name.startswith("requests.")
            and domain != "kubernetes.io" and not domain.endswith(".kubernetes.io"))


def is_lendable_pattern(item: str) -> bool:
    """A name `is_lendable_extended`, or every one of a domain (`example.com/*`) or every huge
    page size (`hugepages-*`)."""
    if not item.endswith("*"):
        return is_lendable_extended(item)
    prefix = item[:-1]
    return prefix == "hugepages-" or (prefix.endswith("/") and is_lendable_extended(prefix + "x"))


def lent(name: str, extended: Sequence[str]) -> bool:
    """Whether `name` is offered: a base resource, or one the provider lists (exactly, or by a
    prefix ending in `*`: `hugepages-*`)."""
    if name in OFFERED_RESOURCES:
        return True
    return any(name == item or (item.endswith("*") and name.startswith(item[:-1]))
               for item in extended)


def node_allocatable(node: Mapping[str, Any], extended: Sequence[str] = ()
                     ) -> dict[str, Decimal]:
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return {name: parse_quantity(value) for name, value in allocatable.items()
            if lent(name, extended)}


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


def free_per_node(nodes: Iterable[Mapping[str, Any]],
                  reservations: Iterable[tuple[str, Mapping[str, Decimal]]],
                  extended: Sequence[str] = ()) -> list[dict[str, Decimal]]:
    """Per schedulable node, what it has left of each offered resource (never below zero)."""
    left = {(n.get("metadata") or {}).get("name"): node_allocatable(n, extended)
            for n in nodes if node_is_schedulable(n)}
    for node, requests in reservations:
        if node in left:
            for resource, amount in requests.items():
                if resource in left[node]:
                    left[node][resource] -= amount
    return [{resource: max(amount, Decimal(0)) for resource, amount in per_node.items()}
            for per_node in left.values()]


def free_resources(nodes: Iterable[Mapping[str, Any]],
                   reservations: Iterable[tuple[str, Mapping[str, Decimal]]],
                   extended: Sequence[str] = ()) -> dict[str, Decimal]:
    """Per resource, what schedulable nodes have left: the base resources always (zero without
    nodes), a listed extended resource only when some node has it."""
    total: dict[str, Decimal] = {resource: Decimal(0) for resource in OFFERED_RESOURCES}
    for per_node in free_per_node(nodes, reservations, extended):
        for resource, amount in per_node.items():
            total[resource] = total.get(resource, Decimal(0)) + amount
    return total


def largest_free(nodes: Iterable[Mapping[str, Any]],
                 reservations: Iterable[tuple[str, Mapping[str, Decimal]]],
                 extended: Sequence[str] = ()) -> dict[str, Decimal]:
    """Per resource, the most any one schedulable node has left."""
    largest: dict[str, Decimal] = {}
    for per_node in free_per_node(nodes, reservations, extended):
        for resource, amount in per_node.items():
            largest[resource] = max(largest.get(resource, Decimal(0)), amount)
    return largest


def _is_binary(resource: str) -> bool:
    return resource in _BINARY or resource.startswith("hugepages-")


def quantity_format(resource: str) -> QuantityFormat:
    """How amounts of `resource` are written: bytes in binary suffixes (`3Gi`), the rest in
    decimal ones (`1500m`)."""
    return QuantityFormat.BINARY_SI if _is_binary(resource) else QuantityFormat.DECIMAL_SI


def _canonical(resource: str, value: Decimal) -> str:
    """A canonical quantity: whole pods, whole bytes, whole devices (extended resources are
    integers), cpu to the millicore, rounded down."""
    if resource == "pods" or _is_binary(resource) or resource not in OFFERED_RESOURCES:
        value = Decimal(int(value))
    else:
        value = value.quantize(Decimal("0.001"), rounding="ROUND_DOWN")
    return format_quantity(value, quantity_format(resource))


def share(free: Mapping[str, Decimal], percent: Decimal) -> dict[str, str]:
    """`percent` of `free`, as canonical quantities (`_canonical`)."""
    return {resource: _canonical(resource, amount * percent / 100)
            for resource, amount in free.items()}


def max_pod_resources(largest: Mapping[str, Decimal], offered: Mapping[str, str]
                      ) -> dict[str, str]:
    """What one pod can get: per offered resource, the most one node has free (`largest_free`),
    never more than the offer. `pods` is left out (a pod is one pod)."""
    result: dict[str, str] = {}
    for resource, text in offered.items():
        if resource == "pods":
            continue
        result[resource] = _canonical(
            resource, min(largest.get(resource, Decimal(0)), parse_quantity(text)))
    return result


def pod_shortfalls(pod_spec: Mapping[str, Any], most: Mapping[str, str]) -> list[str]:
    """What of a pod's requests (as a scheduler counts them: `pod_requests`) one pod cannot get
    where at most `most` is free for one pod (`max_pod_resources`), one `cpu 3 > 1500m` per
    resource, in `most`'s order; empty when it fits. A resource `most` does not name is not
    judged: the virtual node does not offer it, so the home scheduler places no pod asking it
    there. A malformed quantity is the API server's to refuse, and is not judged either."""
    try:
        requested = pod_requests(pod_spec)
    except ValueError:
        return []
    found = []
    for resource, text in most.items():
        wanted = requested.get(resource, Decimal(0))
        try:
            limit = parse_quantity(text)
        except ValueError:
            continue
        if resource != "pods" and wanted > limit:
            found.append(f"{resource} {format_quantity(wanted, quantity_format(resource))} > "
                         f"{text}")
    return found


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
