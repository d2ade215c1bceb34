"""annex.api_paths: the REST paths of collections, objects and subresources, and what a request
does as the API server's audit log names it."""

from __future__ import annotations

import pytest

from annex.api_paths import core_path, custom_path, group_path, request_verb
from shared.api.shadowpod import SHADOWPOD


def test_paths_name_collections_objects_and_subresources() -> None:
    assert core_path("pods") == "/api/v1/pods"
    assert core_path("pods", "ns", "p", "status") == "/api/v1/namespaces/ns/pods/p/status"
    assert core_path("nodes", name="a/b") == "/api/v1/nodes/a%2Fb"
    assert group_path("coordination.k8s.io", "v1", "leases", "kube-node-lease", "n") == (
        "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n")
    assert custom_path(SHADOWPOD, "twin") == (
        f"/apis/{SHADOWPOD.group}/{SHADOWPOD.version}/namespaces/twin/{SHADOWPOD.plural}")


@pytest.mark.parametrize(("method", "path", "watch", "expected"), [
    ("GET", "/api/v1/namespaces/a/pods", False, ("list", "", "pods")),
    ("GET", "/api/v1/namespaces/a/pods", True, ("watch", "", "pods")),
    ("GET", "/api/v1/pods", False, ("list", "", "pods")),
    ("PATCH", "/api/v1/namespaces/a/pods/p/status", False, ("patch", "", "pods/status")),
    ("POST", "/api/v1/namespaces/a/serviceaccounts/default/token", False,
     ("create", "", "serviceaccounts/token")),
    ("GET", "/api/v1/namespaces", False, ("list", "", "namespaces")),
    ("DELETE", "/api/v1/namespaces/a", False, ("delete", "", "namespaces")),
    ("PUT", "/api/v1/namespaces/a/finalize", False, ("update", "", "namespaces/finalize")),
    ("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n", False,
     ("update", "coordination.k8s.io", "leases")),
    ("DELETE", "/apis/offloading.liqo.io/v1beta1/namespaces/t/shadowpods", False,
     ("deletecollection", "offloading.liqo.io", "shadowpods")),
    ("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x", False,
     ("get", "apiextensions.k8s.io", "customresourcedefinitions")),
    ("GET", "/livez", False, ("get", "", "")),
])
def test_a_request_is_named_by_verb_group_and_resource_as_the_audit_log_names_it(
        method: str, path: str, watch: bool, expected: tuple[str, str, str]) -> None:
    assert request_verb(method, path, watch) == expected
