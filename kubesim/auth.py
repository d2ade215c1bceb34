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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubesim import errors
from kubesim.apiserver import ApiServer, SubresourceRequest, User
from kubesim.errors import FieldCause
from kubesim.reviews import install_reviews
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


def role_reference_rules(ref: Mapping[str, Any], namespace: str,
                         roles: Mapping[tuple[str, str], Mapping[str, Any]],
                         cluster_roles: Mapping[str, Mapping[str, Any]]
                         ) -> tuple[Sequence[Mapping[str, Any]] | None, str]:
    """GetRoleReferenceRules: the rules a roleRef names (a Role in the binding's `namespace`),
    or None and the authorizer's wording of the missing role."""
    name = ref.get("name", "")
    if ref.get("kind") == "ClusterRole":
        role = cluster_roles.get(name)
        missing = f'clusterrole.{RBAC_GROUP} "{name}" not found'
    else:
        role = roles.get((namespace, name))
        missing = f'role.{RBAC_GROUP} "{name}" not found'
    if role is None:
        return None, missing
    return role.get("rules") or (), ""


def visit_rules(
    user: Any, namespace: str,
    cluster_role_bindings: Iterable[Mapping[str, Any]],
    role_bindings: Iterable[Mapping[str, Any]],
    roles: Mapping[tuple[str, str], Mapping[str, Any]],
    cluster_roles: Mapping[str, Mapping[str, Any]],
    errors: list[str],
) -> Iterator[Mapping[str, Any]]:
    """VisitRulesFor: every rule bound to `user` cluster-wide and in `namespace` (its
    `role_bindings`); the roles found missing on the way are added to `errors`."""
    bindings = [(b, "") for b in cluster_role_bindings]
    if namespace:
        bindings += [(b, namespace) for b in role_bindings]
    for binding, binding_namespace in bindings:
        if not any(subject_matches(s, user, binding_namespace)
                   for s in binding.get("subjects") or []):
            continue
        rules, missing = role_reference_rules(binding["roleRef"], binding_namespace, roles,
                                              cluster_roles)
        if rules is None:
            errors.append(missing)
            continue
        yield from rules


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
    for rule in visit_rules(attributes.user, attributes.namespace, cluster_role_bindings,
                            role_bindings, roles, cluster_roles, decision.errors):
        if rule_allows(rule, attributes):
            decision.allowed = True
            decision.errors.clear()
            return decision
    return decision


@dataclass(frozen=True)
class RbacObjects:
    """The RBAC objects one decision reads: all cluster-scoped ones and one namespace's."""

    cluster_role_bindings: list[dict[str, Any]]
    role_bindings: list[dict[str, Any]]
    roles: dict[tuple[str, str], dict[str, Any]]
    cluster_roles: dict[str, dict[str, Any]]


class RbacAuthorizer:
    """The ApiServer's authorizer: RBAC over the cluster's own Role/Binding objects."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def _objects(self, plural: str, namespace: str = "") -> list[dict[str, Any]]:
        return [stored.obj for stored in self._store.list((RBAC_GROUP, plural), namespace)]

    def objects(self, namespace: str) -> RbacObjects:
        return RbacObjects(
            self._objects("clusterrolebindings"),
            self._objects("rolebindings", namespace) if namespace else [],
            {(namespace, r["metadata"]["name"]): r for r in self._objects("roles", namespace)}
            if namespace else {},
            {r["metadata"]["name"]: r for r in self._objects("clusterroles")})

    def authorize(self, attributes: Any) -> tuple[bool, str]:
        user = attributes.user
        if MASTERS_GROUP in user.groups:
            return True, ""
        if not attributes.resource_request and attributes.verb == "get" and any(
            _url_matches({"nonResourceURLs": [p]}, attributes.path) for p in PUBLIC_PATHS
        ):
            return True, ""
        found = self.objects(attributes.namespace)
        decision = evaluate(attributes, found.cluster_role_bindings, found.role_bindings,
                            found.roles, found.cluster_roles)
        return decision.allowed, decision.reason

    def rules_for(self, user: Any, namespace: str) -> tuple[list[Mapping[str, Any]], list[str]]:
        """RulesFor: every rule `user` holds in `namespace` ("": cluster-wide), and the
        missing roles its bindings name."""
        found = self.objects(namespace)
        errors: list[str] = []
        rules = list(visit_rules(user, namespace, found.cluster_role_bindings,
                                 found.role_bindings, found.roles, found.cluster_roles, errors))
        return rules, errors


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


LEEWAY_SECONDS = 60
"""go-jose's jwt.DefaultLeeway, which kube-apiserver's service-account validator applies to
exp and nbf (pkg/serviceaccount/claims.go `public.Validate`)."""


class TokenSigner:
    """Issues and checks service-account JWTs (HS256 with a key private to one cluster).

    `clock` is the server's time (tests move it forward to see tokens expire)."""

    def __init__(self, issuer: str, key: bytes | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.issuer = issuer
        self._key = key or secrets.token_bytes(32)
        self.clock = clock

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
        now = self.clock() if now is None else now
        # Expired once now - leeway is after exp; not yet valid while now + leeway is before nbf.
        if now - LEEWAY_SECONDS > float(claims.get("exp", 0)):
            return None
        if now + LEEWAY_SECONDS < float(claims.get("nbf", 0)):
            return None
        return claims


def new_static_token() -> str:
    return secrets.token_urlsafe(24)


# ---------------------------------------------------------------------------------------------
# TokenRequest (serviceaccounts/token) and the authenticators a cluster gets

API_AUDIENCE = "https://kubernetes.default.svc.cluster.local"
TOKEN_REQUEST_KIND = "TokenRequest.authentication.k8s.io"
DEFAULT_EXPIRATION = 3600  # SetDefaults_TokenRequestSpec
MIN_EXPIRATION = 600
MAX_EXPIRATION = 2**32
WARN_ONLY_EXPIRATION = 3607  # the kubelet's projected-token default (serviceaccount.WarnOnly...)
EXTENDED_EXPIRATION = 365 * 24 * 3600  # ExpirationExtensionSeconds
POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
POD_UID_EXTRA = "authentication.kubernetes.io/pod-uid"
# The kinds a token may be bound to, by their storage key (token.go: Pod, Node, Secret).
BINDABLE_KINDS = {"Pod": "pods", "Secret": "secrets", "Node": "nodes"}


def _expiration_errors(seconds: Any) -> list[FieldCause]:
    """ValidateTokenRequest."""
    path = "spec.expirationSeconds"
    if not isinstance(seconds, int) or seconds < MIN_EXPIRATION:
        return [FieldCause(path, "Invalid value",
                           "may not specify a duration less than 10 minutes", seconds)]
    if seconds > MAX_EXPIRATION:
        return [FieldCause(path, "Invalid value",
                           "may not specify a duration larger than 2^32 seconds", seconds)]
    return []


def _group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def _gvk_string(api_version: str, kind: str) -> str:
    """schema.GroupVersionKind.String(): "group/version, Kind=kind" ("/v1, Kind=X" for core)."""
    group, _, version = api_version.rpartition("/")
    return f"{group}/{version}, Kind={kind}"


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ServiceAccountTokens:
    """Issues TokenRequest tokens (pkg/registry/core/serviceaccount/storage/token.go) and
    authenticates them against the live objects (a bound token dies with its object)."""

    def __init__(self, api: ApiServer, signer: TokenSigner,
                 audiences: Sequence[str] = (API_AUDIENCE,)) -> None:
        self.api = api
        self.signer = signer
        self.audiences = tuple(audiences)

    def _get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        stored = self.api.store.get(("", plural), namespace, name)
        return stored.obj if stored is not None else None

    def _bound_object(self, account: str, namespace: str,
                      ref: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """The object a boundObjectRef names: (kind, object), or the error token.go answers."""
        api_version, kind, name = ref.get("apiVersion", ""), ref.get("kind", ""), ref.get(
            "name", "")
        plural = BINDABLE_KINDS.get(kind)
        if _group_of(api_version) != "" or plural is None:
            raise errors.bad_request(
                f"cannot bind token to object of type {_gvk_string(api_version, kind)}")
        obj = self._get(plural, "" if kind == "Node" else namespace, name)
        if obj is None:
            raise errors.not_found(plural, name)
        if kind == "Pod" and (obj.get("spec") or {}).get("serviceAccountName") != account:
            raise errors.bad_request(f'cannot bind token for serviceaccount "{account}" to pod '
                                     "running with different serviceaccount name.")
        uid = obj["metadata"]["uid"]
        if ref.get("uid") and ref["uid"] != uid:
            # NewConflict(GroupResource{Resource: gvk.Kind}, ...): the kind, not the plural
            raise errors.conflict(
                kind, name, f"the UID in the bound object reference ({ref['uid']}) does not "
                "match the UID in record. The object might have been deleted and then recreated")
        return kind, obj

    async def token_request(self, request: SubresourceRequest) -> dict[str, Any]:
        """`create serviceaccounts/token`: a TokenRequest answered with status.token."""
        namespace, name = request.namespace, request.name
        body = request.body if isinstance(request.body, dict) else {}
        body = await self.api.mutate_created_subresource(request, {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", **body})
        metadata = body.get("metadata") or {}
        for field_name, expected, what in (("name", name, "name"),
                                           ("namespace", namespace, "namespace")):
            given = metadata.get(field_name)
            if given and given != expected:
                raise errors.invalid(TOKEN_REQUEST_KIND, name, [FieldCause(
                    f"metadata.{field_name}", "Invalid value",
                    f"must match the service account {what} if specified", given)])
        account = self._get("serviceaccounts", namespace, name)
        if account is None:
            raise errors.not_found("serviceaccounts", name)
        spec = dict(body.get("spec") or {})
        seconds = spec.get("expirationSeconds", DEFAULT_EXPIRATION)
        audiences = list(spec.get("audiences") or self.audiences)
        causes = _expiration_errors(seconds)
        if causes:
            raise errors.invalid(TOKEN_REQUEST_KIND, "", causes)
        now = self.signer.clock()
        # token.go: the defaults filled in, then validating admission, before the bound object
        # is looked up
        await self.api.validate_created_subresource(request, {
            **body, "metadata": {**metadata, "name": name, "namespace": namespace,
                                 "creationTimestamp": _timestamp(now)},
            "spec": {**spec, "audiences": audiences, "expirationSeconds": seconds},
            "status": {}})
        private: dict[str, Any] = {"namespace": namespace, "serviceaccount": {
            "name": name, "uid": account["metadata"]["uid"]}}
        bound = spec.get("boundObjectRef")
        lifetime = int(seconds)
        if bound:
            kind, obj = self._bound_object(name, namespace, bound)
            reference = {"name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"]}
            private[kind.lower()] = reference
            # --service-account-extend-token-expiration (on by default): a pod-bound token of
            # the kubelet's default lifetime for the API server's audiences stays valid a year;
            # the answer still says 3607 s (the kubelet refreshes on that).
            if kind == "Pod" and lifetime == WARN_ONLY_EXPIRATION and set(audiences) <= set(
                    self.audiences):
                lifetime = EXTENDED_EXPIRATION
        issued = int(now)
        claims: dict[str, Any] = {
            "aud": audiences, "exp": issued + lifetime, "iat": issued, "nbf": issued,
            "jti": secrets.token_hex(16), "sub": service_account_user_name(namespace, name),
            "kubernetes.io": private,
        }
        spec.update(audiences=audiences, expirationSeconds=int(seconds))
        return {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"name": name, "namespace": namespace,
                             "creationTimestamp": _timestamp(now)},
                "spec": spec,
                "status": {"token": self.signer.issue(claims),
                           "expirationTimestamp": _timestamp(now + int(seconds))}}

    def authenticate(self, token: str) -> User | None:
        claims = self.signer.claims(token)
        if claims is None or not set(claims.get("aud") or ()) & set(self.audiences):
            return None
        private = claims.get("kubernetes.io") or {}
        namespace = private.get("namespace", "")
        account_ref = private.get("serviceaccount") or {}
        account = self._get("serviceaccounts", namespace, account_ref.get("name", ""))
        if account is None or account["metadata"]["uid"] != account_ref.get("uid"):
            return None
        for kind, plural in BINDABLE_KINDS.items():  # a bound object must still be the same
            ref = private.get(kind.lower())
            if ref:
                obj = self._get(plural, "" if kind == "Node" else namespace, ref.get("name", ""))
                if obj is None or obj["metadata"]["uid"] != ref.get("uid"):
                    return None
        extra: dict[str, tuple[str, ...]] = {}
        pod_ref = private.get("pod")
        if pod_ref:
            extra = {POD_NAME_EXTRA: (pod_ref["name"],), POD_UID_EXTRA: (pod_ref["uid"],)}
        return User(service_account_user_name(namespace, account_ref["name"]),
                    service_account_groups(namespace), account_ref["uid"], extra)


def add_static_token(cluster: Any, user_name: str, groups: Sequence[str] = (),
                     token: str | None = None) -> str:
    """Add a bearer token for `user_name` to the cluster's static token list; returns it."""
    token = token or new_static_token()
    cluster.tokens[token] = User(user_name, (*groups, AUTHENTICATED_GROUP))
    return token


BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
BOOTSTRAP_ANNOTATIONS = {"rbac.authorization.kubernetes.io/autoupdate": "true"}


def bootstrap_policy() -> list[tuple[str, dict[str, Any]]]:
    """The bootstrap `cluster-admin` ClusterRole and its binding to system:masters, as a real
    cluster has them (plural, object)."""
    metadata = {"name": "cluster-admin", "labels": BOOTSTRAP_LABELS,
                "annotations": BOOTSTRAP_ANNOTATIONS}
    role = {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole", "metadata": metadata,
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                      {"nonResourceURLs": ["*"], "verbs": ["*"]}]}
    binding = {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRoleBinding",
               "metadata": metadata,
               "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole",
                           "name": "cluster-admin"},
               "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": MASTERS_GROUP}]}
    return [("clusterroles", role), ("clusterrolebindings", binding)]


async def seed_bootstrap_policy(api: ApiServer) -> None:
    for plural, obj in bootstrap_policy():
        kind = api.kinds.get(RBAC_GROUP, "v1", plural)
        assert kind is not None
        if api.store.get(kind.storage_key, "", obj["metadata"]["name"]) is None:
            await api.create(kind, "", obj)


def install_auth(cluster: Any) -> RbacAuthorizer:
    """RBAC as the authorizer (returned), TokenRequest served, service-account tokens
    accepted."""
    api: ApiServer = cluster.api
    authorizer = RbacAuthorizer(api.store)
    api.authorizer = authorizer
    tokens = ServiceAccountTokens(api, TokenSigner(issuer=API_AUDIENCE))
    service_accounts = api.kinds.get("", "v1", "serviceaccounts")
    assert service_accounts is not None
    api.register_subresource(service_accounts, "token", tokens.token_request)
    cluster.authenticators.append(tokens.authenticate)
    cluster.service_account_tokens = tokens
    install_reviews(cluster)

    async def seed(_: Any) -> None:
        await seed_bootstrap_policy(api)

    cluster.startup_hooks.insert(0, seed)
    return authorizer
