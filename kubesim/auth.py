"""Authentication (static bearer tokens, TokenRequest tokens) and the RBAC authorizer.

RBAC follows plugin/pkg/auth/authorizer/rbac (rule matching in rbac/v1 helpers): ClusterRoleBindings
grant everywhere, RoleBindings only inside their namespace; `system:masters` bypasses RBAC as it
does on a real server. Service-account tokens are HS256 JWTs signed with a per-cluster key; they are
checked on every request against the live ServiceAccount (and the bound pod, if any).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubesim.store import Store

RBAC_GROUP = "rbac.authorization.k8s.io"
MASTERS_GROUP = "system:masters"
AUTHENTICATED_GROUP = "system:authenticated"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
SERVICE_ACCOUNTS_GROUP = "system:serviceaccounts"
# What bootstrap policy (system:discovery, system:public-info-viewer) lets every user read.
PUBLIC_PATHS = ("/api", "/api/*", "/apis", "/apis/*", "/version", "/version/", "/healthz",
                "/livez", "/readyz", "/openapi", "/openapi/*")


# ---------------------------------------------------------------------------------------------
# RBAC rule matching (k8s.io/kubernetes/pkg/apis/rbac/v1/evaluation_helpers.go)


def _verb_matches(rule: Mapping[str, Any], verb: str) -> bool:
    verbs = rule.get("verbs") or []
    return "*" in verbs or verb in verbs


def _group_matches(rule: Mapping[str, Any], group: str) -> bool:
    groups = rule.get("apiGroups") or []
    return "*" in groups or group in groups


def _resource_matches(rule: Mapping[str, Any], resource: str, subresource: str) -> bool:
    combined = f"{resource}/{subresource}" if subresource else resource
    for candidate in rule.get("resources") or []:
        if candidate in ("*", combined):
            return True
        # "*/status" grants that subresource of every resource
        if subresource and candidate.startswith("*/") and candidate[2:] == subresource:
            return True
    return False


def _name_matches(rule: Mapping[str, Any], name: str) -> bool:
    names = rule.get("resourceNames") or []
    return not names or name in names


def _url_matches(rule: Mapping[str, Any], path: str) -> bool:
    for pattern in rule.get("nonResourceURLs") or []:
        if pattern == "*" or pattern == path:
            return True
        if pattern.endswith("*") and path.startswith(pattern[:-1]):
            return True
    return False


def rule_allows(rule: Mapping[str, Any], attributes: Any) -> bool:
    """RuleAllows: one PolicyRule against request attributes."""
    if not _verb_matches(rule, attributes.verb):
        return False
    if not attributes.resource_request:
        return _url_matches(rule, attributes.path)
    return (
        _group_matches(rule, attributes.api_group)
        and _resource_matches(rule, attributes.resource, attributes.subresource)
        and _name_matches(rule, attributes.name)
    )


def subject_matches(subject: Mapping[str, Any], user: Any, binding_namespace: str) -> bool:
    """appliesToUser: User by name, Group by membership, ServiceAccount by its user name."""
    kind = subject.get("kind")
    if kind == "User":
        return bool(subject.get("name") == user.name)
    if kind == "Group":
        return subject.get("name") in user.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return bool(user.name == f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{subject.get('name')}")
    return False


@dataclass
class RbacDecision:
    allowed: bool
    errors: list[str] = field(default_factory=list)

    @property
    def reason(self) -> str:
        """The reason the real authorizer attaches: missing roles it met on the way."""
        if not self.errors:
            return ""
        joined = self.errors[0] if len(self.errors) == 1 else "[" + ", ".join(self.errors) + "]"
        return f"RBAC: {joined}"


def evaluate(
    attributes: Any,
    cluster_role_bindings: Iterable[Mapping[str, Any]],
    role_bindings: Iterable[Mapping[str, Any]],
    roles: Mapping[tuple[str, str], Mapping[str, Any]],
    cluster_roles: Mapping[str, Mapping[str, Any]],
) -> RbacDecision:
    """Does any binding of this user grant the request? `role_bindings` are those of the
    request's namespace; `roles` is keyed by (namespace, name)."""
    decision = RbacDecision(allowed=False)

    def rules_of(ref: Mapping[str, Any], namespace: str) -> Sequence[Mapping[str, Any]]:
        name = ref.get("name", "")
        if ref.get("kind") == "ClusterRole":
            role = cluster_roles.get(name)
            missing = f'clusterrole.{RBAC_GROUP} "{name}" not found'
        else:
            role = roles.get((namespace, name))
            missing = f'role.{RBAC_GROUP} "{name}" not found'
        if role is None:
            decision.errors.append(missing)
            return ()
        return role.get("rules") or ()

    bindings = [(b, "") for b in cluster_role_bindings]
    if attributes.namespace:
        bindings += [(b, attributes.namespace) for b in role_bindings]
    for binding, namespace in bindings:
        if not any(subject_matches(s, attributes.user, namespace)
                   for s in binding.get("subjects") or []):
            continue
        if any(rule_allows(rule, attributes) for rule in rules_of(binding["roleRef"], namespace)):
            decision.allowed = True
            decision.errors.clear()
            return decision
    return decision


def forbidden_message(attributes: Any) -> str:
    """responsewriters.forbiddenMessage: what follows "<resource> is forbidden: "."""
    user = attributes.user.name
    if not attributes.resource_request:
        return f'User "{user}" cannot {attributes.verb} path "{attributes.path}"'
    resource = attributes.resource
    if attributes.subresource:
        resource += "/" + attributes.subresource
    where = (f'in the namespace "{attributes.namespace}"' if attributes.namespace
             else "at the cluster scope")
    return (f'User "{user}" cannot {attributes.verb} resource "{resource}" in API group '
            f'"{attributes.api_group}" {where}')


class RbacAuthorizer:
    """The ApiServer's authorizer: RBAC over the cluster's own Role/Binding objects."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def _objects(self, plural: str, namespace: str = "") -> list[dict[str, Any]]:
        return [stored.obj for stored in self._store.list((RBAC_GROUP, plural), namespace)]

    def authorize(self, attributes: Any) -> tuple[bool, str]:
        user = attributes.user
        if MASTERS_GROUP in user.groups:
            return True, ""
        if not attributes.resource_request and attributes.verb == "get" and any(
            _url_matches({"nonResourceURLs": [p]}, attributes.path) for p in PUBLIC_PATHS
        ):
            return True, ""
        namespace = attributes.namespace
        roles = {
            (namespace, r["metadata"]["name"]): r for r in self._objects("roles", namespace)
        } if namespace else {}
        cluster_roles = {r["metadata"]["name"]: r for r in self._objects("clusterroles")}
        decision = evaluate(
            attributes,
            self._objects("clusterrolebindings"),
            self._objects("rolebindings", namespace) if namespace else [],
            roles,
            cluster_roles,
        )
        return decision.allowed, decision.reason


# ---------------------------------------------------------------------------------------------
# Tokens


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def service_account_user_name(namespace: str, name: str) -> str:
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def service_account_groups(namespace: str) -> tuple[str, ...]:
    return (SERVICE_ACCOUNTS_GROUP, f"{SERVICE_ACCOUNTS_GROUP}:{namespace}", AUTHENTICATED_GROUP)


class TokenSigner:
    """Issues and checks service-account JWTs (HS256 with a key private to one cluster)."""

    def __init__(self, issuer: str, key: bytes | None = None) -> None:
        self.issuer = issuer
        self._key = key or secrets.token_bytes(32)

    def issue(self, claims: Mapping[str, Any]) -> str:
        header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        payload = _b64(json.dumps({"iss": self.issuer, **claims}, sort_keys=True).encode())
        signature = hmac.new(self._key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
        return f"{header}.{payload}.{_b64(signature)}"

    def claims(self, token: str, now: float | None = None) -> dict[str, Any] | None:
        """The token's claims if it is ours, well-formed and unexpired; else None."""
        parts = token.split(".")
        if len(parts) != 3:
            return None
        header, payload, signature = parts
        expected = hmac.new(self._key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
        try:
            if not hmac.compare_digest(_unb64(signature), expected):
                return None
            claims: dict[str, Any] = json.loads(_unb64(payload))
        except (ValueError, json.JSONDecodeError):
            return None
        if claims.get("iss") != self.issuer:
            return None
        if float(claims.get("exp", 0)) <= (time.time() if now is None else now):
            return None
        return claims


def new_static_token() -> str:
    return secrets.token_urlsafe(24)
