"""RBAC evaluation: rules, bindings, subjects and the real 403 wording."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kubesim.apiserver import forbidden_message
from kubesim.auth import evaluate, rule_allows


def user(name: str, *groups: str) -> SimpleNamespace:
    return SimpleNamespace(name=name, groups=groups)


def request(verb: str = "get", resource: str = "pods", namespace: str = "team", name: str = "",
            group: str = "", subresource: str = "", who: Any = None,
            path: str = "") -> SimpleNamespace:
    return SimpleNamespace(user=who or user("alice"), verb=verb, api_group=group,
                           resource=resource, subresource=subresource, namespace=namespace,
                           name=name, resource_request=not path, path=path)


def test_rule_matches_groups_resources_verbs_and_names() -> None:
    rule = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}
    assert rule_allows(rule, request())
    assert not rule_allows(rule, request(verb="delete"))
    assert not rule_allows(rule, request(group="apps"))
    assert not rule_allows(rule, request(resource="secrets"))
    named = {**rule, "resourceNames": ["web"]}
    assert rule_allows(named, request(name="web"))
    assert not rule_allows(named, request(name="db"))
    wildcard = {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}
    assert rule_allows(wildcard, request(verb="deletecollection", group="apps"))


def test_subresources_need_their_own_grant() -> None:
    pods = {"apiGroups": [""], "resources": ["pods"], "verbs": ["update"]}
    status = {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["update"]}
    any_status = {"apiGroups": [""], "resources": ["*/status"], "verbs": ["update"]}
    assert not rule_allows(pods, request("update", subresource="status"))
    assert rule_allows(status, request("update", subresource="status"))
    assert not rule_allows(status, request("update"))
    assert rule_allows(any_status, request("update", subresource="status"))


def test_non_resource_urls_with_prefix_wildcard() -> None:
    rule = {"nonResourceURLs": ["/metrics", "/logs/*"], "verbs": ["get"]}
    assert rule_allows(rule, request(path="/metrics"))
    assert rule_allows(rule, request(path="/logs/kubelet"))
    assert not rule_allows(rule, request(path="/debug"))


def binding(kind: str, role_kind: str, role: str, *subjects: dict[str, str],
            namespace: str = "") -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": "b", "namespace": namespace},
            "roleRef": {"kind": role_kind, "name": role}, "subjects": list(subjects)}


READ_PODS = {"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]}


def test_role_binding_grants_only_inside_its_namespace() -> None:
    rb = binding("RoleBinding", "ClusterRole", "reader", {"kind": "User", "name": "alice"},
                 namespace="team")
    roles = {"reader": READ_PODS}
    assert evaluate(request(verb="list"), [], [rb], {}, roles).allowed
    # the same binding is not consulted for other namespaces or the cluster scope
    assert not evaluate(request(verb="list", namespace="other"), [], [], {}, roles).allowed
    assert not evaluate(request(verb="list", namespace=""), [], [rb], {}, roles).allowed


def test_service_account_and_group_subjects() -> None:
    sa = user("system:serviceaccount:team:robot", "system:serviceaccounts",
              "system:serviceaccounts:team", "system:authenticated")
    by_sa = binding("RoleBinding", "Role", "reader", {"kind": "ServiceAccount", "name": "robot"},
                    namespace="team")
    by_group = binding("ClusterRoleBinding", "ClusterRole", "reader",
                       {"kind": "Group", "name": "system:serviceaccounts:team"})
    roles = {("team", "reader"): READ_PODS}
    assert evaluate(request(who=sa), [], [by_sa], roles, {}).allowed
    assert evaluate(request(who=sa, namespace="x"), [by_group], [], {}, {"reader": READ_PODS}
                    ).allowed
    assert not evaluate(request(who=user("bob")), [by_group], [], {}, {"reader": READ_PODS}
                        ).allowed


def test_missing_role_is_reported_like_the_real_authorizer() -> None:
    rb = binding("ClusterRoleBinding", "ClusterRole", "gone", {"kind": "User", "name": "alice"})
    decision = evaluate(request(), [rb], [], {}, {})
    assert not decision.allowed
    assert decision.reason == 'RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found'


def test_forbidden_message_wording() -> None:
    assert forbidden_message(request(verb="list", who=user("x"), namespace="y")) == (
        'User "x" cannot list resource "pods" in API group "" in the namespace "y"')
    assert forbidden_message(request(verb="get", resource="nodes", namespace="",
                                     subresource="status")) == (
        'User "alice" cannot get resource "nodes/status" in API group "" at the cluster scope')
    assert forbidden_message(request(path="/metrics")) == 'User "alice" cannot get path "/metrics"'
