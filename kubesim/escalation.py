"""RBAC privilege-escalation prevention, as kube-apiserver's policy-based RBAC storage does it
(pkg/registry/rbac/{role,clusterrole,rolebinding,clusterrolebinding}/policybased/storage.go,
pkg/registry/rbac/validation/rule.go ConfirmNoEscalation, component-helpers' Covers).

Writing a Role or ClusterRole needs every rule it grants to be held by the writer (in the
Role's namespace; cluster-wide for a ClusterRole), or the `escalate` verb on it; writing a
RoleBinding or ClusterRoleBinding needs every rule of the role it references to be held (in
the binding's namespace), or the `bind` verb on that role (resourceNames apply). Members of
system:masters are not checked. The check runs where the real storage runs it: after mutating
admission, before validation and validating admission; an update that only changes
ownerReferences or finalizers (the garbage collector's) is not checked.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from kubesim import errors
from kubesim.apiserver import AdmissionChain, AdmissionRequest, RequestAttributes, User
from kubesim.auth import MASTERS_GROUP, RBAC_GROUP, RbacAuthorizer, role_reference_rules

Rule = Mapping[str, Any]
ROLES = ("roles", "clusterroles")
BINDINGS = ("rolebindings", "clusterrolebindings")
# What an aggregationRule may gather: anything, so setting one needs cluster-admin's rights.
FULL_AUTHORITY: list[Rule] = [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                              {"nonResourceURLs": ["*"], "verbs": ["*"]}]


def breakdown(rule: Rule) -> list[dict[str, Any]]:
    """BreakdownRule: one rule per group, resource, verb and resource name (URL and verb)."""
    names = rule.get("resourceNames") or []
    subrules: list[dict[str, Any]] = []
    for group in rule.get("apiGroups") or []:
        for resource in rule.get("resources") or []:
            for verb in rule.get("verbs") or []:
                base = {"apiGroups": [group], "resources": [resource], "verbs": [verb]}
                subrules += ([{**base, "resourceNames": [name]} for name in names] if names
                             else [base])
    for url in rule.get("nonResourceURLs") or []:
        subrules += [{"nonResourceURLs": [url], "verbs": [verb]}
                     for verb in rule.get("verbs") or []]
    return subrules


def _has_all(owned: Sequence[str], wanted: Sequence[str]) -> bool:
    return set(wanted) <= set(owned)


def _resources_cover(owned: Sequence[str], wanted: Sequence[str]) -> bool:
    """resourceCoversAll: "*", every resource, or "*/<subresource>" for a subresource."""
    if "*" in owned or _has_all(owned, wanted):
        return True
    for path in wanted:
        if path in owned:
            continue
        if "/" not in path or "*/" + path.split("/", 1)[1] not in owned:
            return False
    return True


def _url_covers(owner: str, path: str) -> bool:
    return owner == path or (owner.endswith("*") and path.startswith(owner.rstrip("*")))


def rule_covers(owner: Rule, subrule: Rule) -> bool:
    """ruleCovers: `owner` grants all of `subrule` (one of `breakdown`'s)."""
    verbs, groups = owner.get("verbs") or [], owner.get("apiGroups") or []
    owned_names, names = owner.get("resourceNames") or [], subrule.get("resourceNames") or []
    return ((("*" in verbs) or _has_all(verbs, subrule.get("verbs") or []))
            and (("*" in groups) or _has_all(groups, subrule.get("apiGroups") or []))
            and _resources_cover(owner.get("resources") or [], subrule.get("resources") or [])
            and all(any(_url_covers(o, path) for o in owner.get("nonResourceURLs") or [])
                    for path in subrule.get("nonResourceURLs") or [])
            and (not owned_names or (bool(names) and _has_all(owned_names, names))))


def uncovered(owner_rules: Sequence[Rule], rules: Sequence[Rule]) -> list[dict[str, Any]]:
    """Covers: the parts of `rules` none of `owner_rules` grants."""
    return [subrule for rule in rules for subrule in breakdown(rule)
            if not any(rule_covers(owner, subrule) for owner in owner_rules)]


def compact(rules: Sequence[Rule]) -> list[dict[str, Any]]:
    """CompactRules: rules of one group, one resource and at most one name, joined by verb."""
    compacted: list[dict[str, Any]] = []
    simple: dict[tuple[str, str, tuple[str, ...]], dict[str, Any]] = {}
    for rule in rules:
        names = rule.get("resourceNames") or []
        is_simple = (len(names) <= 1 and not rule.get("nonResourceURLs")
                     and len(rule.get("apiGroups") or []) == 1
                     and len(rule.get("resources") or []) == 1)
        if not is_simple:
            compacted.append(dict(rule))
            continue
        key = (rule["apiGroups"][0], rule["resources"][0], tuple(names))
        if key in simple:
            simple[key]["verbs"] = [*simple[key]["verbs"], *(rule.get("verbs") or [])]
        else:
            simple[key] = {**rule, "verbs": list(rule.get("verbs") or [])}
    return compacted + list(simple.values())


def _go_strings(items: Sequence[str]) -> str:
    """fmt's %q of a []string: ["a" "b"]."""
    return "[" + " ".join(json.dumps(item) for item in items) + "]"


def compact_string(rule: Rule) -> str:
    """rbacv1helpers.CompactString: {APIGroups:["x"], Resources:["y"], Verbs:["z"]}."""
    parts = [f"{label}:{_go_strings(rule[key])}" for label, key in (
        ("APIGroups", "apiGroups"), ("Resources", "resources"),
        ("NonResourceURLs", "nonResourceURLs"), ("ResourceNames", "resourceNames"),
        ("Verbs", "verbs")) if rule.get(key)]
    return "{" + ", ".join(parts) + "}"


def escalation_message(user: User, missing: Sequence[Rule], resolution_errors: Sequence[str]
                       ) -> str:
    """ConfirmNoEscalation's refusal, word for word."""
    described = sorted({compact_string(rule) for rule in compact(missing)})
    message = (f"user {json.dumps(user.name)} (groups={_go_strings(user.groups)}) is attempting "
               "to grant RBAC permissions not currently held:\n" + "\n".join(described))
    if resolution_errors:
        joined = (resolution_errors[0] if len(resolution_errors) == 1
                  else "[" + ", ".join(resolution_errors) + "]")
        message += f"; resolution errors: [{joined}]"
    return message


def _only_gc_fields_change(new: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    """IsOnlyMutatingGCFields: nothing but ownerReferences and finalizers differ."""
    if old is None:
        return False

    def without_gc(obj: Mapping[str, Any]) -> dict[str, Any]:
        meta = {k: v for k, v in (obj.get("metadata") or {}).items()
                if k not in ("ownerReferences", "finalizers", "resourceVersion",
                             "managedFields")}
        return {**obj, "metadata": meta}
    return without_gc(new) == without_gc(old)


class EscalationCheck:
    """Wraps the cluster's admission chain: RBAC writes are checked once mutated."""

    def __init__(self, inner: AdmissionChain, authorizer: RbacAuthorizer) -> None:
        self.inner = inner
        self.authorizer = authorizer

    def __getattr__(self, name: str) -> Any:
        # The chain's plugins stay reachable as before it was wrapped (their settings stand for
        # kube-apiserver's flags, e.g. --default-not-ready-toleration-seconds).
        return getattr(self.inner, name)

    async def mutate(self, request: AdmissionRequest) -> dict[str, Any] | None:
        mutated = await self.inner.mutate(request)
        self.confirm(request if mutated is None else dataclasses.replace(request, object=mutated))
        return mutated

    async def validate(self, request: AdmissionRequest) -> None:
        await self.inner.validate(request)

    async def close(self) -> None:
        await self.inner.close()

    def _allowed(self, user: User, verb: str, plural: str, namespace: str, name: str) -> bool:
        attributes = RequestAttributes(user, verb, RBAC_GROUP, "*", plural, "", namespace, name)
        return self.authorizer.authorize(attributes)[0]

    def _confirm_held(self, request: AdmissionRequest, rules: Sequence[Rule]) -> None:
        held, resolution_errors = self.authorizer.rules_for(request.user, request.namespace)
        missing = uncovered(held, rules)
        if missing:
            raise errors.forbidden(request.kind.group_resource, request.name,
                                   escalation_message(request.user, missing, resolution_errors))

    def confirm(self, request: AdmissionRequest) -> None:
        kind, obj = request.kind, request.object
        if (kind.group != RBAC_GROUP or kind.plural not in (*ROLES, *BINDINGS) or obj is None
                or request.subresource or request.operation not in ("CREATE", "UPDATE")
                or MASTERS_GROUP in request.user.groups
                or _only_gc_fields_change(obj, request.old_object)):
            return
        if kind.plural in ROLES:
            # RoleEscalationAuthorized: the request's own name, none for a create
            name = request.name if request.operation == "UPDATE" else ""
            if self._allowed(request.user, "escalate", kind.plural, request.namespace, name):
                return
            self._confirm_held(request, obj.get("rules") or [])
            if obj.get("aggregationRule") and uncovered(
                    self.authorizer.rules_for(request.user, "")[0], FULL_AUTHORITY):
                raise errors.forbidden(kind.group_resource, request.name,
                                       "must have cluster-admin privileges to use the "
                                       "aggregationRule")
            return
        ref = obj.get("roleRef") or {}
        role_plural = "clusterroles" if ref.get("kind") == "ClusterRole" else "roles"
        if self._allowed(request.user, "bind", role_plural, request.namespace,
                         str(ref.get("name", ""))):
            return
        found = self.authorizer.objects(request.namespace)
        rules, _ = role_reference_rules(ref, request.namespace, found.roles,
                                        found.cluster_roles)
        if rules is None:  # the registry's getter: a 404 for the role
            raise errors.not_found(f"{role_plural}.{RBAC_GROUP}", str(ref.get("name", "")))
        self._confirm_held(request, rules)


def install_escalation_check(api: Any, authorizer: RbacAuthorizer) -> None:
    api.admission = EscalationCheck(api.admission, authorizer)
