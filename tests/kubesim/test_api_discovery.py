"""Discovery documents, as the real server publishes them."""

from __future__ import annotations

import pytest

from tests.kubesim.rest import call

BUILT_INS = {
    "v1": ["namespaces", "nodes", "pods", "services", "endpoints", "configmaps", "secrets",
           "serviceaccounts", "events", "persistentvolumeclaims", "persistentvolumes"],
    "apps/v1": ["deployments", "replicasets"],
    "discovery.k8s.io/v1": ["endpointslices"],
    "events.k8s.io/v1": ["events"],
    "coordination.k8s.io/v1": ["leases"],
    "networking.k8s.io/v1": ["ingresses"],
    "apiextensions.k8s.io/v1": ["customresourcedefinitions"],
    "admissionregistration.k8s.io/v1": ["mutatingwebhookconfigurations",
                                        "validatingwebhookconfigurations"],
    "rbac.authorization.k8s.io/v1": ["roles", "rolebindings", "clusterroles",
                                     "clusterrolebindings"],
}


def resources(home, group_version: str) -> dict[str, dict]:
    path = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    status, body = call(home, "GET", path)
    assert status == 200 and body["kind"] == "APIResourceList"
    assert body["groupVersion"] == group_version
    return {r["name"]: r for r in body["resources"]}


def test_api_lists_the_core_version(home) -> None:
    status, body = call(home, "GET", "/api")
    assert status == 200 and body["kind"] == "APIVersions" and body["versions"] == ["v1"]


def test_apis_lists_groups_with_preferred_versions(home) -> None:
    status, body = call(home, "GET", "/apis")
    groups = {g["name"]: g for g in body["groups"]}
    assert body["kind"] == "APIGroupList"
    assert groups["apps"]["preferredVersion"] == {"groupVersion": "apps/v1", "version": "v1"}
    status, body = call(home, "GET", "/apis/apps")
    assert status == 200 and body["kind"] == "APIGroup" and body["name"] == "apps"


@pytest.mark.parametrize("group_version", sorted(BUILT_INS))
def test_every_built_in_kind_is_served(home, group_version: str) -> None:
    served = resources(home, group_version)
    for plural in BUILT_INS[group_version]:
        assert plural in served, plural


@pytest.mark.since("1.27", "built-in resources name their singular in discovery")
def test_built_in_resources_carry_their_singular_name(home) -> None:
    core = resources(home, "v1")
    assert (core["pods"]["singularName"], core["nodes"]["singularName"]) == ("pod", "node")
    assert resources(home, "apps/v1")["deployments"]["singularName"] == "deployment"


def test_resources_carry_kind_scope_verbs_and_short_names(home) -> None:
    core = resources(home, "v1")
    pods = core["pods"]
    assert pods["kind"] == "Pod" and pods["namespaced"] is True
    assert "po" in pods["shortNames"]
    assert {"create", "delete", "deletecollection", "get", "list", "patch", "update",
            "watch"} <= set(pods["verbs"])
    assert "all" in pods["categories"]
    assert core["nodes"]["namespaced"] is False


def test_namespaces_cannot_be_deleted_as_a_collection(home) -> None:
    namespaces = resources(home, "v1")["namespaces"]
    assert sorted(namespaces["verbs"]) == ["create", "delete", "get", "list", "patch", "update",
                                           "watch"]
    # no route: the server does not even read a selector
    status, _ = call(home, "DELETE", "/api/v1/namespaces",
                     query={"labelSelector": "kubernetes.io/metadata.name=nothing-here"})
    assert status == 405


def test_subresources_are_listed_as_plural_slash_name(home) -> None:
    core = resources(home, "v1")
    for name in ("pods/status", "pods/binding", "pods/log", "nodes/status", "services/status",
                 "serviceaccounts/token", "namespaces/finalize"):
        assert name in core, name
    assert core["pods/binding"]["kind"] == "Binding"
    assert set(core["pods/status"]["verbs"]) == {"get", "patch", "update"}
    assert "deployments/status" in resources(home, "apps/v1")


def test_unknown_paths_are_404(home) -> None:
    assert call(home, "GET", "/apis/nope.example.com/v1")[0] == 404
    assert call(home, "GET", "/api/v1/nopes")[0] == 404


def test_the_reviews_are_listed_create_only(home) -> None:
    """TokenReview and SubjectAccessReview: cluster-scoped, create only (what a delegating
    server such as a kubelet checks before it calls them); no other method on them."""
    for group_version, plural, kind in (
            ("authentication.k8s.io/v1", "tokenreviews", "TokenReview"),
            ("authorization.k8s.io/v1", "subjectaccessreviews", "SubjectAccessReview")):
        entry = resources(home, group_version)[plural]
        assert (entry["kind"], entry["namespaced"], entry["verbs"]) == (kind, False, ["create"])
        status, body = call(home, "GET", "/apis")
        assert group_version in [g["preferredVersion"]["groupVersion"] for g in body["groups"]]
        assert call(home, "GET", f"/apis/{group_version}/{plural}")[0] == 405
