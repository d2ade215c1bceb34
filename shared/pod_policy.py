"""What a provider lets a consumer run: the offloading allow-list re-applied on the provider side
and the Pod Security Standards level the provider chooses per consumer (`shared.pod_security`),
so that a consumer, or anyone holding its kubeconfig, gets no privileged, host-namespace or
hostPath pod through the enforcer, which may create pods cluster-wide.

The home agent already forges an allow-listed spec (shared.forge.pod), but the provider cannot
trust the consumer's side: the ShadowPod admission and the enforcer check every `spec.pod`
again here.

Beyond the Pod Security Standards, the fields that place, prioritise or mount on the provider's
nodes must be granted by the consumer's policy, whatever the level: tolerations, the node labels
of nodeSelector and node affinity (never `matchFields`), priority and runtime classes,
schedulers and volume types. Each refusal names the field and the policy rule.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from shared.api.quota import PodPolicy, Toleration
from shared.pod_security import (
    POD_SECURITY_VERSION,
    all_containers,
    pod_security_violations,
    quoted,
    volume_sources,
)


def _allowed_phrase(rule: str, allowed: str) -> str:
    """What `rule` (a field of the consumer's podPolicy) allows, as a refusal ends."""
    return f"(podPolicy.{rule}: {allowed or 'none'})"


def _refused(field: str, what: str, rule: str, allowed: str) -> str:
    return (f"{field}: Forbidden: {what} is not allowed for this consumer "
            f"{_allowed_phrase(rule, allowed)}")


# --- placement and priority -------------------------------------------------------------------

TOLERATION_FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")


def _toleration_text(toleration: Mapping[str, Any]) -> str:
    shown = {k: toleration[k] for k in TOLERATION_FIELDS if toleration.get(k) not in (None, "")}
    return json.dumps(shown)


def _tolerates_all(key: str, operator: str) -> bool:
    return not key and operator == "Exists"


def _covers(allowed: Toleration, toleration: Mapping[str, Any]) -> bool:
    """Whether the allowed toleration covers the pod's: the same key (an allowed tolerate-all
    covers every key, and only it covers a tolerate-all), an effect the allowed one names (an
    empty one: every effect) and, unless the allowed one is `Exists`, the same value."""
    key = str(toleration.get("key") or "")
    operator = str(toleration.get("operator") or "Equal")
    if allowed.effect and toleration.get("effect") != allowed.effect:
        return False
    if _tolerates_all(allowed.key, allowed.operator):
        return True
    if _tolerates_all(key, operator) or key != allowed.key:
        return False
    return allowed.operator == "Exists" or (
        operator == "Equal" and str(toleration.get("value") or "") == allowed.value)


def _toleration_violations(policy: PodPolicy, spec: Mapping[str, Any]) -> list[str]:
    allowed = ", ".join(_toleration_text(t.model_dump(by_alias=True))
                        for t in policy.allowed_tolerations)
    found = []
    for index, toleration in enumerate(spec.get("tolerations") or []):
        if any(_covers(a, toleration) for a in policy.allowed_tolerations):
            continue
        what = f"toleration {_toleration_text(toleration)}"
        if _tolerates_all(str(toleration.get("key") or ""), str(toleration.get("operator"))):
            what += " (it tolerates every taint)"
        found.append(_refused(f"spec.tolerations[{index}]", what, "allowedTolerations", allowed))
    return found


NODE_AFFINITY_FIELD = "spec.affinity.nodeAffinity"
REQUIRED_TERMS_FIELD = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED_TERMS_FIELD = "preferredDuringSchedulingIgnoredDuringExecution"


def _node_selector_terms(spec: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The node affinity's terms, required and preferred, each with its field path."""
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = (affinity.get(REQUIRED_TERMS_FIELD) or {}).get("nodeSelectorTerms") or []
    preferred = affinity.get(PREFERRED_TERMS_FIELD) or []
    return [
        *((f"{NODE_AFFINITY_FIELD}.{REQUIRED_TERMS_FIELD}.nodeSelectorTerms[{i}]", term or {})
          for i, term in enumerate(required)),
        *((f"{NODE_AFFINITY_FIELD}.{PREFERRED_TERMS_FIELD}[{i}].preference",
           (weighted or {}).get("preference") or {}) for i, weighted in enumerate(preferred))]


def _node_label_violations(policy: PodPolicy, spec: Mapping[str, Any]) -> list[str]:
    allowed = policy.allowed_node_labels

    def refused(field: str, key: Any) -> str:
        return _refused(field, f'node label "{key}"', "allowedNodeLabels", quoted(allowed))
    found = [refused(f"spec.nodeSelector[{key}]", key)
             for key in spec.get("nodeSelector") or {} if key not in allowed]
    for field, term in _node_selector_terms(spec):
        found += [refused(f"{field}.matchExpressions[{i}].key", expression.get("key"))
                  for i, expression in enumerate(term.get("matchExpressions") or [])
                  if expression.get("key") not in allowed]
        if term.get("matchFields"):
            found.append(f"{field}.matchFields: Forbidden: offloaded pods select nodes by "
                         "labels only, never by node fields (the provider's scheduler chooses "
                         "the node)")
    return found


def _named_class_violations(policy: PodPolicy, spec: Mapping[str, Any]) -> list[str]:
    """priorityClassName, runtimeClassName and schedulerName against their allow-lists."""
    found = []
    for field, what, rule, allowed in (
            ("priorityClassName", "priority class", "allowedPriorityClasses",
             policy.allowed_priority_classes),
            ("runtimeClassName", "runtime class", "allowedRuntimeClasses",
             policy.allowed_runtime_classes),
            ("schedulerName", "scheduler", "allowedSchedulerNames",
             policy.allowed_scheduler_names)):
        name = spec.get(field)
        if name and name not in allowed:
            found.append(_refused(f"spec.{field}", f'{what} "{name}"', rule, quoted(allowed)))
    # The Priority admission plugin computes spec.priority from the class: a value set without
    # a class is a priority the provider did not grant (a class not allowed is refused above).
    classes = policy.allowed_priority_classes
    if spec.get("priority") is not None and not spec.get("priorityClassName"):
        found.append("spec.priority: Forbidden: a priority is set only through an allowed "
                     "priority class "
                     + _allowed_phrase("allowedPriorityClasses", quoted(classes)))
    return found


def _volume_type_violations(policy: PodPolicy, spec: Mapping[str, Any]) -> list[str]:
    allowed = policy.allowed_volume_types
    return [_refused(f"spec.volumes[{index}]",
                     f'volume "{volume.get("name")}" of type "{source}"', "allowedVolumeTypes",
                     quoted(allowed))
            for index, volume in enumerate(spec.get("volumes") or [])
            for source in volume_sources(volume) if source not in allowed]


def allow_list_violations(policy: PodPolicy, spec: Mapping[str, Any]) -> list[str]:
    """What the offloading allow-list forbids whatever the level: host namespaces, a node chosen
    by the consumer, host ports unless the provider allows them, and tolerations, node labels,
    priority, runtime and scheduler classes and volume types the provider's policy does not
    list."""
    found = [f"spec.{field}: Forbidden: offloaded pods do not share the node's namespaces"
             for field in ("hostNetwork", "hostPID", "hostIPC") if spec.get(field)]
    if spec.get("nodeName"):
        found.append("spec.nodeName: Forbidden: the provider's scheduler places offloaded pods")
    if not policy.allow_host_ports:
        ports = sorted({int(p["hostPort"]) for c in all_containers(spec)
                        for p in c.get("ports") or [] if p.get("hostPort")})
        if ports:
            found.append(f"hostPort {', '.join(map(str, ports))}: Forbidden: the provider does "
                         "not allow host ports for this consumer")
    return [*found, *_toleration_violations(policy, spec), *_node_label_violations(policy, spec),
            *_named_class_violations(policy, spec), *_volume_type_violations(policy, spec)]


def _unindexed(violation: str) -> str:
    """A violation without its list indices: the same one wherever an update moved it."""
    return re.sub(r"\[\d+\]", "[]", violation)


def _added(found: list[str], before: list[str]) -> list[str]:
    had = {_unindexed(v) for v in before}
    return [v for v in found if _unindexed(v) not in had]


def policy_problem(policy: PodPolicy, spec: Mapping[str, Any],
                   annotations: Mapping[str, str] | None = None, *,
                   old_spec: Mapping[str, Any] | None = None,
                   old_annotations: Mapping[str, str] | None = None) -> str | None:
    """Why the provider refuses a pod of this spec for a consumer with `policy`, or None. For an
    update (`old_spec`, `old_annotations`: the version it replaces) only what the old version
    did not break already: a pod admitted under a looser policy may still change what a pod
    update may change after the provider tightened it (as the PodSecurity plugin exempts such
    updates)."""
    problems = allow_list_violations(policy, spec)
    level = pod_security_violations(policy.pod_security, spec, annotations)
    if old_spec is not None:
        problems = _added(problems, allow_list_violations(policy, old_spec))
        level = _added(level, pod_security_violations(policy.pod_security, old_spec,
                                                      old_annotations))
    if level:
        problems.append(f'violates PodSecurity "{policy.pod_security.value}:'
                        f'{POD_SECURITY_VERSION}": {", ".join(level)}')
    return "; ".join(problems) if problems else None
