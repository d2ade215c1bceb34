"""RBAC evaluation: rules, bindings, subjects and the real 403 wording; privilege escalation
through RBAC writes refused as kube-apiserver refuses it (through the API, also on real
clusters)."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes import client

from kubesim.apiserver import forbidden_message
from kubesim.auth import evaluate, rule_allows
from kubesim.escalation import compact, uncovered
from tests.helpers import refusal, wait_for
from tests.kubesim.test_auth_tokens import client_with_token


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


def test_covers_breaks_rules_down_and_the_missing_parts_are_compacted_by_verb() -> None:
    held = [{"apiGroups": [""], "resources": ["configmaps", "pods/*"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["*/status"], "verbs": ["*"]},
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"],
             "resourceNames": ["web"]}]
    wanted = [{"apiGroups": [""], "resources": ["configmaps", "secrets"],
               "verbs": ["get", "list"]},
              {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
              {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"],
               "resourceNames": ["web", "db"]},
              {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}]
    assert compact(uncovered(held, wanted)) == [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]},
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"],
         "resourceNames": ["db"]},
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}]


RBAC = "rbac.authorization.k8s.io"


@pytest.fixture
def writer(home: Any, namespace: str) -> Iterator[client.RbacAuthorizationV1Api]:
    """A service account that may write roles and bindings in `namespace` and read its
    ConfigMaps, nothing more (its rights: the Role "writer")."""
    home.core.create_namespaced_service_account(namespace, {"metadata": {"name": "writer"}})
    grant(home, namespace, "writer", [
        {"apiGroups": [RBAC], "resources": ["roles", "rolebindings"],
         "verbs": ["get", "create", "update"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}])
    token = home.core.create_namespaced_service_account_token(
        "writer", namespace, {"spec": {"expirationSeconds": 3600}}).status.token
    with client_with_token(home, token) as api_client:
        yield client.RbacAuthorizationV1Api(api_client)


def grant(home: Any, namespace: str, name: str, rules: list[dict[str, Any]]) -> None:
    """The Role `name` with `rules`, bound to the service account "writer" (by the admin)."""
    rbac = client.RbacAuthorizationV1Api(home.api_client)
    rbac.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": rules})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "writer", "namespace": namespace}]})


def held_message(namespace: str, kind: str, name: str, *missing: str) -> str:
    groups = f'["system:serviceaccounts" "system:serviceaccounts:{namespace}" ' \
             '"system:authenticated"]'
    return (f'{kind}.{RBAC} "{name}" is forbidden: user '
            f'"system:serviceaccount:{namespace}:writer" (groups={groups}) is attempting to '
            "grant RBAC permissions not currently held:\n" + "\n".join(missing))


def binding_to(name: str, kind: str, role: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "roleRef": {"apiGroup": RBAC, "kind": kind, "name": role},
            "subjects": [{"kind": "User", "name": "somebody"}]}


def test_a_role_granting_rules_its_writer_does_not_hold_is_refused(
        home: Any, namespace: str, writer: client.RbacAuthorizationV1Api) -> None:
    secrets = {"metadata": {"name": "secrets"}, "rules": [
        {"apiGroups": [""], "resources": ["secrets", "configmaps"], "verbs": ["get", "list"]}]}
    assert wait_for(lambda: refusal(lambda: writer.create_namespaced_role(namespace, secrets))
                    ) == held_message(namespace, "roles", "secrets",
                                      '{APIGroups:[""], Resources:["secrets"], '
                                      'Verbs:["get" "list"]}')
    # the rules it holds, it may grant
    writer.create_namespaced_role(namespace, {"metadata": {"name": "configmaps"}, "rules": [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]})
    # with `escalate` on roles, anything
    grant(home, namespace, "escalate", [
        {"apiGroups": [RBAC], "resources": ["roles"], "verbs": ["escalate"]}])
    wait_for(lambda: writer.create_namespaced_role(namespace, secrets),
             message="escalate lets it grant what it does not hold")


def test_a_binding_needs_the_role_s_rules_held_or_bind_on_that_role(
        home: Any, namespace: str, writer: client.RbacAuthorizationV1Api) -> None:
    admin = binding_to("admin", "ClusterRole", "cluster-admin")
    assert wait_for(lambda: refusal(
        lambda: writer.create_namespaced_role_binding(namespace, admin))) == held_message(
        namespace, "rolebindings", "admin", '{APIGroups:["*"], Resources:["*"], Verbs:["*"]}',
        '{NonResourceURLs:["*"], Verbs:["*"]}')
    # a role whose rules it holds, it may bind
    rbac = client.RbacAuthorizationV1Api(home.api_client)
    rbac.create_namespaced_role(namespace, {"metadata": {"name": "read"}, "rules": [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]})
    writer.create_namespaced_role_binding(namespace, binding_to("read", "Role", "read"))
    # `bind` on one ClusterRole by name lets it bind that one, and no other
    other = f"t-{uuid.uuid4().hex[:10]}"
    rbac.create_cluster_role({"metadata": {"name": other}, "rules": [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]})
    try:
        grant(home, namespace, "bind", [{"apiGroups": [RBAC], "resources": ["clusterroles"],
                                         "verbs": ["bind"], "resourceNames": ["cluster-admin"]}])
        wait_for(lambda: writer.create_namespaced_role_binding(namespace, admin),
                 message="bind on cluster-admin lets it bind cluster-admin")
        assert refusal(lambda: writer.create_namespaced_role_binding(
            namespace, binding_to("other", "ClusterRole", other))) == held_message(
            namespace, "rolebindings", "other", '{APIGroups:[""], Resources:["secrets"], '
            'Verbs:["get"]}')
    finally:
        rbac.delete_cluster_role(other)


def test_a_list_or_watch_pinned_to_one_name_is_authorized_as_that_name(
        home: Any, namespace: str, writer: client.RbacAuthorizationV1Api) -> None:
    """A fieldSelector `metadata.name=` makes a list or a watch a request for that name, as
    kube-apiserver's request info reads it: resourceNames then allow following one object (a
    standby's watch of its election Lease), and nothing else of the collection."""
    grant(home, namespace, "one-secret", [{"apiGroups": [""], "resources": ["secrets"],
                                           "verbs": ["list", "watch"], "resourceNames": ["one"]}])
    secrets = client.CoreV1Api(writer.api_client)
    wait_for(lambda: secrets.list_namespaced_secret(namespace, field_selector="metadata.name=one"),
             message="the list pinned to the name it may read")
    assert list(secrets.list_namespaced_secret(
        namespace, field_selector="metadata.name=one", watch=True, timeout_seconds=1,
        _preload_content=False).stream()) == []
    for pinned, refused in (("", "secrets"), ("metadata.name=two", 'secrets "two"'),
                            ("metadata.name!=one", "secrets")):
        assert refusal(functools.partial(secrets.list_namespaced_secret, namespace,
                                         field_selector=pinned)) == (
            f'{refused} is forbidden: User "system:serviceaccount:{namespace}:writer" cannot '
            f'list resource "secrets" in API group "" in the namespace "{namespace}"')
