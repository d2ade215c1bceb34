"""Quota arithmetic for admitting ShadowPods on the provider.

A pod's usage is what the scheduler reserves for it (component-helpers' PodRequests): the sum of
its containers' requests, max'd per resource with what its init containers need while they run
(plus the sidecars started before them), plus one `pods`. Pod overhead is not counted: the remote
spec never carries it (it is dropped with the home RuntimeClass).

Limits (`limits_for`): the Quota's `resources`, and for every resource it does not list, what
the provider offers the consumer (its ResourceOffer); a consumer without a Quota is limited by
its offer alone. A pod requesting a resource that neither names is refused: nothing of it is
offered (the virtual node has none of it either). Extended resources (`nvidia.com/gpu`) and huge
pages count as cpu does: against the Quota's limit for them, else the offer's, which names them
only when the provider lends them; in Hard mode their requests must equal their limits, as the
API server requires of extended resources anyway.

Enforcement modes (Quota.spec.limitsEnforcement, Liqo's meaning):
- None: requests need not be set; what the pod does request (a container without requests
  counts as zero) must fit in what the limits have left. Liqo's webhook compares the sums in
  every mode; so do we.
- Soft: every container and init container must request cpu and memory, and the pod's usage
  must fit.
- Hard: as Soft, and in addition each container's requests must equal its limits.
A cordoned consumer gets no new pods whatever the mode.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from shared.api.quota import LimitsEnforcement
from shared.quantity import QuantityFormat, format_quantity, parse

QuantityLike = str | int | float | Decimal

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
REQUIRED_REQUESTS = (CPU, MEMORY)


@dataclass(frozen=True)
class QuotaDecision:
    """Whether a pod is admitted; `message` says why not. `requested` is the pod's usage, to
    add to the consumer's used total when the pod is admitted."""

    allowed: bool
    message: str = ""
    requested: dict[str, Decimal] = field(default_factory=dict)


def _quantity(value: QuantityLike) -> tuple[Decimal, QuantityFormat]:
    """The value and the suffix style to report it in (a Decimal is shown with decimal SI)."""
    if isinstance(value, Decimal):
        return value, QuantityFormat.DECIMAL_SI
    quantity = parse(value)
    return quantity.value, quantity.format


def _amount(value: QuantityLike) -> Decimal:
    return _quantity(value)[0]


def _requests(container: Mapping[str, Any]) -> dict[str, Decimal]:
    """The container's requests as the API server stores them: a resource it only limits is
    requested at its limit (SetDefaults_Pod), as extended resources usually are
    (`limits: {nvidia.com/gpu: 1}`); else a ShadowPod naming only limits would run pods whose
    requests no quota counted."""
    resources = container.get("resources") or {}
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: _amount(value) for name, value in merged.items()}


def _add(total: dict[str, Decimal], extra: Mapping[str, Decimal]) -> dict[str, Decimal]:
    return {name: total.get(name, Decimal(0)) + extra.get(name, Decimal(0))
            for name in total.keys() | extra.keys()}


def _max(first: Mapping[str, Decimal], second: Mapping[str, Decimal]) -> dict[str, Decimal]:
    return {name: max(first.get(name, Decimal(0)), second.get(name, Decimal(0)))
            for name in first.keys() | second.keys()}


def _is_sidecar(container: Mapping[str, Any]) -> bool:
    return container.get("restartPolicy") == "Always"


def pod_requests(pod_spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """What a pod uses against a quota, per resource name (ValueError on a malformed quantity).

    Containers run together, so their requests add up; init containers run one at a time before
    them, so only the largest counts. Sidecars (init containers with restartPolicy Always) keep
    running: they add up with the containers and with every init container after them.
    """
    usage: dict[str, Decimal] = {}
    for container in pod_spec.get("containers") or []:
        usage = _add(usage, _requests(container))
    sidecars: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    for container in pod_spec.get("initContainers") or []:
        if _is_sidecar(container):
            usage = _add(usage, _requests(container))
            sidecars = _add(sidecars, _requests(container))
            running = sidecars
        else:
            running = _add(sidecars, _requests(container))
        init_peak = _max(init_peak, running)
    usage = _max(usage, init_peak)
    usage[PODS] = usage.get(PODS, Decimal(0)) + 1
    return usage


def total_usage(pods_requests: Iterable[Mapping[str, Decimal]]) -> dict[str, Decimal]:
    """The consumer's used total: the sum of its admitted pods' `pod_requests`."""
    total: dict[str, Decimal] = {}
    for requests in pods_requests:
        total = _add(total, requests)
    return total


def _all_containers(pod_spec: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    return [("container", c) for c in pod_spec.get("containers") or []] + [
        ("initContainer", c) for c in pod_spec.get("initContainers") or []
    ]


def _request_problems(pod_spec: Mapping[str, Any], enforcement: LimitsEnforcement) -> list[str]:
    problems = []
    for what, container in _all_containers(pod_spec):
        name = container.get("name", "")
        requests = _requests(container)
        missing = [resource for resource in REQUIRED_REQUESTS if resource not in requests]
        if missing:
            problems.append(
                f"{what} {name!r} does not request {' and '.join(missing)} "
                f"(required by {enforcement} limits enforcement)"
            )
        if enforcement is LimitsEnforcement.HARD:
            limits = (container.get("resources") or {}).get("limits") or {}
            for resource, requested in sorted(requests.items()):
                limit = limits.get(resource)
                if limit is None or _amount(limit) != requested:
                    shown = "none" if limit is None else str(limit)
                    problems.append(
                        f"{what} {name!r}: {resource} request {format_quantity(requested)} "
                        f"differs from its limit {shown} (Hard limits enforcement)"
                    )
    return problems


def limits_for(quota_resources: Mapping[str, QuantityLike] | None,
               offered: Mapping[str, QuantityLike]) -> dict[str, QuantityLike]:
    """What a consumer's pods are admitted against: its Quota's `resources` (None: it has no
    Quota), and the offer's amount for every resource the Quota does not list."""
    return {**offered, **(quota_resources or {})}


def _unoffered(limits: Mapping[str, QuantityLike], requested: Mapping[str, Decimal]
               ) -> list[str]:
    return [f"{resource} is neither offered to this consumer nor in its quota: requested "
            f"{format_quantity(requested[resource])}, none available"
            for resource in sorted(requested.keys() - limits.keys()) if requested[resource] > 0]


def _shortfalls(
    limits: Mapping[str, QuantityLike],
    used: Mapping[str, QuantityLike],
    requested: Mapping[str, Decimal],
) -> list[str]:
    problems = []
    for resource in sorted(requested.keys() & limits.keys()):
        limit_value, style = _quantity(limits[resource])  # report in the quota's own style
        in_use = _amount(used.get(resource, Decimal(0)))
        short = in_use + requested[resource] - limit_value
        if short > 0:
            problems.append(
                f"quota exceeded for {resource}: requested "
                f"{format_quantity(requested[resource], style)}, used "
                f"{format_quantity(in_use, style)} of {format_quantity(limit_value, style)}, "
                f"short by {format_quantity(short, style)}"
            )
    return problems


def admit(
    enforcement: LimitsEnforcement,
    cordoned: bool,
    limits: Mapping[str, QuantityLike],
    used: Mapping[str, QuantityLike],
    pod_spec: Mapping[str, Any],
) -> QuotaDecision:
    """Whether a consumer with `limits` (`limits_for`), of which `used` is taken, may start a
    pod with `pod_spec`. Every reason for a refusal is listed, so one attempt shows them all."""
    try:
        requested = pod_requests(pod_spec)
    except ValueError as error:
        return QuotaDecision(allowed=False, message=f"invalid resource quantity: {error}")
    if cordoned:
        return QuotaDecision(
            allowed=False,
            message="the consumer is cordoned: no new pods are admitted",
            requested=requested,
        )
    enforcement = LimitsEnforcement(enforcement)
    try:
        problems = [] if enforcement is LimitsEnforcement.NONE else _request_problems(
            pod_spec, enforcement)
        problems += _shortfalls(limits, used, requested) + _unoffered(limits, requested)
    except ValueError as error:
        return QuotaDecision(False, f"invalid resource quantity: {error}", requested)
    return QuotaDecision(allowed=not problems, message="; ".join(problems), requested=requested)


def admit_claim(
    cordoned: bool,
    limits: Mapping[str, QuantityLike],
    used: Mapping[str, QuantityLike],
    claim_usage: Mapping[str, QuantityLike],
) -> QuotaDecision:
    """Whether a consumer may create a claim using `claim_usage` (`requests.storage`,
    `persistentvolumeclaims`) within `limits` (`limits_for`). Storage limits hold whatever the
    limits enforcement mode (it is about pods' cpu and memory requests): a quota that lists
    `requests.storage` caps it; an offer names no storage amount, so without one in the Quota
    only the twin namespaces' object counts bound the claims."""
    try:
        requested = {name: _amount(value) for name, value in claim_usage.items()}
    except ValueError as error:
        return QuotaDecision(allowed=False, message=f"invalid resource quantity: {error}")
    if cordoned:
        return QuotaDecision(False, "the consumer is cordoned: no new claims are admitted",
                             requested)
    try:
        problems = _shortfalls(limits, used, requested)
    except ValueError as error:
        return QuotaDecision(False, f"invalid resource quantity: {error}", requested)
    return QuotaDecision(allowed=not problems, message="; ".join(problems), requested=requested)


def used_for(quota_spec: Mapping[str, Any], usage: Mapping[str, Decimal]) -> dict[str, str]:
    """The usage of the resources the quota limits, each in the style of its limit."""
    used = {}
    for resource, limit in (quota_spec.get("resources") or {}).items():
        try:
            style = parse(limit).format
        except ValueError:
            style = QuantityFormat.DECIMAL_SI
        used[resource] = format_quantity(usage.get(resource, Decimal(0)), style)
    return used
