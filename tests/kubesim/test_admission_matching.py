"""Which webhooks see a request, and how a denial reads (pure parts of kubesim.admission)."""

from __future__ import annotations

from typing import Any

from kubesim.admission import (
    denial,
    namespace_selector_matches,
    object_selector_matches,
    rule_matches,
)

PODS = {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}


def matches(rule: dict[str, Any], operation: str = "CREATE", resource: str = "pods",
            subresource: str = "", namespace: str = "ns", group: str = "") -> bool:
    return rule_matches(rule, operation, group, "v1", resource, subresource, namespace)


def test_operations_groups_versions_and_resources() -> None:
    assert matches(PODS)
    assert not matches(PODS, operation="UPDATE")
    assert matches({**PODS, "operations": ["*"]}, operation="DELETE")
    assert not matches(PODS, resource="services")
    assert not matches(PODS, group="apps")


def test_subresources_match_only_when_named() -> None:
    assert not matches(PODS, operation="CREATE", subresource="binding")
    assert matches({**PODS, "resources": ["pods/*"]}, subresource="binding")
    assert matches({**PODS, "resources": ["pods/*"]})  # "*" also matches the main resource
    assert matches({**PODS, "resources": ["*/status"]}, subresource="status")
    assert not matches({**PODS, "resources": ["*/status"]})


def test_scope() -> None:
    assert not matches({**PODS, "scope": "Cluster"})
    assert matches({**PODS, "scope": "Namespaced"})
    namespaces = {**PODS, "resources": ["namespaces"], "scope": "Cluster"}
    assert matches(namespaces, resource="namespaces", namespace="ns")


def test_namespace_selector_over_the_namespaces_labels() -> None:
    hook = {"namespaceSelector": {"matchLabels": {"offload": "yes"}}}
    assert namespace_selector_matches(hook, {"offload": "yes"})
    assert not namespace_selector_matches(hook, {})
    assert namespace_selector_matches(hook, None)  # cluster-scoped objects are not filtered


def test_object_selector_matches_new_or_old_object() -> None:
    hook = {"objectSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}}
    labelled = {"metadata": {"labels": {"app": "x"}}}
    assert object_selector_matches(hook, labelled, None)
    assert object_selector_matches(hook, {"metadata": {}}, labelled)
    assert not object_selector_matches(hook, {"metadata": {}}, None)


def test_denial_reads_like_the_real_server() -> None:
    error = denial("policy.example.com", {"message": "no", "code": 403, "reason": "Forbidden"})
    assert (error.code, error.message) == (
        403, 'admission webhook "policy.example.com" denied the request: no')
    bare = denial("w", None)
    assert (bare.code, bare.message) == (400, 'admission webhook "w" denied the request '
                                              "without explanation")
