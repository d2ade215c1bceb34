"""The ResourceQuota admission plugin (plugin/pkg/admission/resourcequota with the evaluators of
pkg/quota/v1/evaluator/core and the generic object count evaluator): an object created in a
namespace with ResourceQuotas is refused (403) when it would take a quota past its hard limits.

Pods (the pod evaluator): `pods`, `count/pods`, `cpu`, `memory`, `requests.*` and `limits.*` of
cpu and memory; a pod is refused too when a quota constrains cpu or memory and a container does
not say how much. Every other resource (the object count evaluator): `count/<resource>.<group>`
(`count/<resource>` for the core group), and for the core resources the legacy names
`configmaps`, `secrets`, `services`, `persistentvolumeclaims`, `replicationcontrollers` and
`resourcequotas`; Services also `services.loadbalancers` and `services.nodeports` (the service
evaluator). Other resources of `spec.hard` are left alone.

Usage is counted from the stored objects at admission (what a fully synced quota controller
would have in `status.used`): pods in a terminal phase and pods whose deletion grace period has
passed do not count. The quota controller (kubesim.controllers.resourcequota) writes `status`
from the same counts; admission does not read it, so kubesim never refuses with "status unknown
for quota" as kube-apiserver does until its controller has counted a new quota. Not simulated:
scopes and scope selectors, updates (a Service changing type, a claim growing), claims'
storage."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from kubesim import errors
from kubesim.quantity import parse_quantity
from kubesim.store import Store

QUOTA_KEY = ("", "resourcequotas")
POD_KEY = ("", "pods")
COMPUTE = ("cpu", "memory")
# The resources whose explicit request or limit each container must give when a quota
# constrains them (the pod evaluator's validationSet).
REQUIRED_WHEN_CONSTRAINED = ("cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu",
                             "limits.memory")
EVALUATED = ("pods", "count/pods", *REQUIRED_WHEN_CONSTRAINED)
# The core resources the object count evaluator also counts under their legacy name
# (pkg/quota/v1/evaluator/core/registry.go: legacyObjectCountAliases).
LEGACY_COUNTED = ("configmaps", "secrets", "services", "persistentvolumeclaims",
                  "replicationcontrollers", "resourcequotas")
_DECIMAL_SUFFIXES = (("E", 18), ("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3))
_BINARY_SUFFIXES = (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10))


def format_quantity(value: Decimal, binary: bool) -> str:
    """resource.Quantity's canonical form: the largest suffix that keeps an integer, milli,
    micro or nano units below 1 (BinarySI only for whole numbers, as Go falls back to decimal)."""
    if value == value.to_integral_value():
        whole = int(value)
        if whole == 0:
            return "0"
        if binary:
            for suffix, power in _BINARY_SUFFIXES:
                if whole % (1 << power) == 0:
                    return f"{whole >> power}{suffix}"
            return str(whole)
        for suffix, exponent in _DECIMAL_SUFFIXES:
            if whole % 10**exponent == 0:
                return f"{whole // 10**exponent}{suffix}"
        return str(whole)
    for suffix, exponent in (("m", 3), ("u", 6), ("n", 9)):
        scaled = value * Decimal(10) ** exponent
        if scaled == scaled.to_integral_value():
            return f"{int(scaled)}{suffix}"
    return f"{int((value * Decimal(10) ** 9).to_integral_value())}n"


def _container_usage(container: Mapping[str, Any]) -> dict[str, Decimal]:
    """podComputeUsageHelper for one container: what its requests and limits count as."""
    resources = container.get("resources") or {}
    usage: dict[str, Decimal] = {}
    for name in COMPUTE:
        request = (resources.get("requests") or {}).get(name)
        limit = (resources.get("limits") or {}).get(name)
        if request is not None:
            usage[name] = usage[f"requests.{name}"] = parse_quantity(request)
        if limit is not None:
            usage[f"limits.{name}"] = parse_quantity(limit)
    return usage


def pod_usage(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    """What one pod takes: 1 pod, and per resource the sum over its containers or the largest
    init container's, whichever is more."""
    spec = pod.get("spec") or {}
    total: dict[str, Decimal] = {}
    for container in spec.get("containers") or []:
        for name, value in _container_usage(container).items():
            total[name] = total.get(name, Decimal(0)) + value
    for container in spec.get("initContainers") or []:
        for name, value in _container_usage(container).items():
            total[name] = max(total.get(name, Decimal(0)), value)
    total["pods"] = total["count/pods"] = Decimal(1)
    return total


def counts(pod: Mapping[str, Any], now: datetime) -> bool:
    """QuotaV1Pod: terminal pods and pods past their deletion grace period are not charged."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    metadata = pod.get("metadata") or {}
    deletion = metadata.get("deletionTimestamp")
    if deletion and metadata.get("deletionGracePeriodSeconds") is not None:
        return now <= datetime.fromisoformat(deletion)
    return True


def missing_requests(pod: Mapping[str, Any], constrained: Iterable[str]) -> str | None:
    """The Constraints error ("cpu for: a,b; memory for: c") when a constrained resource is not
    given by every container, or None."""
    required = sorted(set(constrained) & set(REQUIRED_WHEN_CONSTRAINED))
    spec = pod.get("spec") or {}
    missing: dict[str, set[str]] = {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        given = set(_container_usage(container))
        for name in required:
            if name not in given:
                missing.setdefault(name, set()).add(str(container.get("name", "")))
    if not missing:
        return None
    return "must specify " + "; ".join(
        f"{name} for: {','.join(sorted(missing[name]))}" for name in sorted(missing))


def _pretty(values: Mapping[str, Decimal], binary: Mapping[str, bool]) -> str:
    return ",".join(f"{name}={format_quantity(values.get(name, Decimal(0)), binary[name])}"
                    for name in sorted(values))


def object_usage(group: str, plural: str, obj: Mapping[str, Any]) -> dict[str, Decimal]:
    """What one object of a resource other than pods takes: one `count/<resource>[.<group>]`,
    one of its legacy name, and for a Service its load balancer and node ports (the service
    evaluator: a NodePort Service's ports, a LoadBalancer's unless it allocates none)."""
    usage = {f"count/{plural}.{group}" if group else f"count/{plural}": Decimal(1)}
    if not group and plural in LEGACY_COUNTED:
        usage[plural] = Decimal(1)
    if (group, plural) == ("", "services"):
        spec = obj.get("spec") or {}
        kind = spec.get("type") or "ClusterIP"
        ports = Decimal(len(spec.get("ports") or []))
        balanced = kind == "LoadBalancer"
        usage["services.loadbalancers"] = Decimal(1 if balanced else 0)
        usage["services.nodeports"] = ports if kind == "NodePort" or (
            balanced and spec.get("allocateLoadBalancerNodePorts") is not False) else Decimal(0)
    return usage


def _matching(group: str, plural: str, name: str) -> bool:
    """Whether a quota's hard `name` is one the resource's evaluator answers for."""
    if (group, plural) == ("", "pods"):
        return name in EVALUATED
    if (group, plural) == ("", "services") and name in ("services.loadbalancers",
                                                        "services.nodeports"):
        return True
    return name in object_usage(group, plural, {})


def counted_kind(name: str) -> tuple[str, str] | None:
    """The (group, plural) whose objects a quota's hard `name` counts (None: one kubesim does
    not count)."""
    if name in EVALUATED:
        return POD_KEY
    if name in ("services.loadbalancers", "services.nodeports") or name in LEGACY_COUNTED:
        return ("", "services") if name.startswith("services.") else ("", name)
    if name.startswith("count/"):
        plural, _, group = name.removeprefix("count/").partition(".")
        return group, plural
    return None


def used_in(store: Store, group: str, plural: str, namespace: str) -> dict[str, Decimal]:
    """What the namespace's stored objects of the resource take. Plain object counts are
    counted by bisection, not by listing: the quota of a namespace of 50,000 ShadowPods is
    consulted at each create (the real quota reads its status instead)."""
    if (group, plural) not in (POD_KEY, ("", "services")):
        stored_count = Decimal(store.count_after((group, plural), namespace, f"{namespace}/"))
        return {name: value * stored_count
                for name, value in object_usage(group, plural, {}).items()}
    now = datetime.now(UTC)
    used: dict[str, Decimal] = {}
    for stored in store.list((group, plural), namespace):
        if (group, plural) == POD_KEY:
            if not counts(stored.obj, now):
                continue
            usage = pod_usage(stored.obj)
        else:
            usage = object_usage(group, plural, stored.obj)
        for name, value in usage.items():
            used[name] = used.get(name, Decimal(0)) + value
    return used


class ResourceQuotaPlugin:
    def __init__(self, store: Store) -> None:
        self.store = store

    def validate(self, request: Any) -> None:
        if request.subresource or request.operation != "CREATE" or not request.namespace:
            return
        group, plural = request.kind.group, request.kind.plural
        quotas = self.store.list(QUOTA_KEY, request.namespace)
        if not quotas:
            return
        obj = request.object or {}
        is_pod = (group, plural) == POD_KEY
        requested = pod_usage(obj) if is_pod else object_usage(group, plural, obj)
        used: dict[str, Decimal] | None = None  # listed once a quota constrains the resource
        resource = request.kind.group_resource
        for stored in sorted(quotas, key=lambda q: q.name):
            hard_text = {name: str(value) for name, value in
                         ((stored.obj.get("spec") or {}).get("hard") or {}).items()
                         if _matching(group, plural, name)}
            if not hard_text:
                continue
            if used is None:
                used = used_in(self.store, group, plural, request.namespace)
            problem = missing_requests(obj, hard_text) if is_pod else None
            if problem is not None:
                raise errors.forbidden(resource, request.name,
                                       f"failed quota: {stored.name}: {problem}")
            hard = {name: parse_quantity(text) for name, text in hard_text.items()}
            exceeded = sorted(name for name in hard if name in requested
                              and used.get(name, Decimal(0)) + requested[name] > hard[name])
            if exceeded:
                binary = {name: hard_text[name].endswith("i") for name in exceeded}
                raise errors.forbidden(resource, request.name, (
                    f"exceeded quota: {stored.name}, "
                    f"requested: {_pretty({n: requested[n] for n in exceeded}, binary)}, "
                    f"used: {_pretty({n: used.get(n, Decimal(0)) for n in exceeded}, binary)}, "
                    f"limited: {_pretty({n: hard[n] for n in exceeded}, binary)}"))
