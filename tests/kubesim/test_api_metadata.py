"""Object metadata the server owns: uid, resourceVersion, generation, timestamps, generateName,
name/label validation, and refusing content in missing or terminating namespaces."""

from __future__ import annotations

import re
import uuid

import pytest

from tests.kubesim.rest import MERGE, call


def cm_path(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps" + (f"/{name}" if name else "")


def deployment(name: str, image: str = "nginx:1") -> dict:
    labels = {"app": name}
    return {"metadata": {"name": name}, "spec": {
        "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels},
                     "spec": {"containers": [{"name": "c", "image": image}]}}}}


def test_create_sets_uid_resource_version_and_creation_timestamp(home, namespace) -> None:
    status, created = call(home, "POST", cm_path(namespace), {"metadata": {"name": "a"}})
    assert status == 201
    meta = created["metadata"]
    assert uuid.UUID(meta["uid"])
    assert isinstance(meta["resourceVersion"], str) and meta["resourceVersion"].isdigit()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta["creationTimestamp"])


def test_resource_versions_grow_across_kinds(home, namespace) -> None:
    first = call(home, "POST", cm_path(namespace), {"metadata": {"name": "a"}})[1]
    secret = call(home, "POST", f"/api/v1/namespaces/{namespace}/secrets",
                  {"metadata": {"name": "s"}})[1]
    second = call(home, "PATCH", cm_path(namespace, "a"), {"data": {"k": "v"}},
                  content_type=MERGE)[1]
    versions = [int(o["metadata"]["resourceVersion"]) for o in (first, secret, second)]
    assert versions == sorted(versions) and len(set(versions)) == 3


def test_generation_starts_at_1_and_follows_spec_changes_only(home, namespace) -> None:
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    created = call(home, "POST", path, deployment("web"))[1]
    assert created["metadata"]["generation"] == 1
    relabelled = call(home, "PATCH", f"{path}/web", {"metadata": {"labels": {"x": "y"}}},
                      content_type=MERGE)[1]
    assert relabelled["metadata"]["generation"] == 1
    scaled = call(home, "PATCH", f"{path}/web", {"spec": {"replicas": 3}},
                  content_type=MERGE)[1]
    assert scaled["metadata"]["generation"] == 2


def test_generate_name_appends_five_random_characters(home, namespace) -> None:
    status, created = call(home, "POST", cm_path(namespace), {"metadata": {"generateName": "x-"}})
    assert status == 201
    assert re.fullmatch(r"x-[bcdfghjklmnpqrstvwxz2456789]{5}", created["metadata"]["name"])


@pytest.mark.parametrize(("path", "name", "message"), [
    ("/api/v1/namespaces", "Has.Dot",
     'Namespace "Has.Dot" is invalid: metadata.name: Invalid value: "Has.Dot": a lowercase '
     "RFC 1123 label must consist of"),
    ("/api/v1/namespaces/default/services", "1abc",
     'Service "1abc" is invalid: metadata.name: Invalid value: "1abc": a DNS-1035 label must '
     "consist of"),
    ("/api/v1/namespaces/default/configmaps", "UPPER",
     'ConfigMap "UPPER" is invalid: metadata.name: Invalid value: "UPPER": a lowercase RFC 1123 '
     "subdomain must consist of"),
])
def test_names_are_validated_per_kind(home, path: str, name: str, message: str) -> None:
    status, body = call(home, "POST", path, {"metadata": {"name": name}, "spec": {
        "ports": [{"port": 80}]}})
    assert status == 422 and body["reason"] == "Invalid"
    assert body["message"].startswith(message)


def test_a_dotted_configmap_name_is_a_valid_subdomain(home, namespace) -> None:
    assert call(home, "POST", cm_path(namespace), {"metadata": {"name": "a.b"}})[0] == 201


def test_labels_are_validated(home, namespace) -> None:
    status, body = call(home, "POST", cm_path(namespace),
                        {"metadata": {"name": "l", "labels": {"ok": "not ok!"}}})
    assert status == 422
    assert 'metadata.labels: Invalid value: "not ok!"' in body["message"]


def test_content_in_a_missing_namespace_is_404_on_the_namespace(home) -> None:
    status, body = call(home, "POST", cm_path("no-such-namespace"), {"metadata": {"name": "a"}})
    assert status == 404 and body["reason"] == "NotFound"
    assert body["message"] == 'namespaces "no-such-namespace" not found'


def test_content_in_a_terminating_namespace_is_forbidden(home, namespace) -> None:
    # a finalizer on the content keeps the namespace Terminating while we knock
    call(home, "POST", cm_path(namespace), {"metadata": {"name": "held",
                                                         "finalizers": ["example.com/hold"]}})
    status, body = call(home, "DELETE", f"/api/v1/namespaces/{namespace}")
    assert status == 200 and body["status"]["phase"] == "Terminating"
    status, body = call(home, "POST", cm_path(namespace), {"metadata": {"name": "late"}})
    assert status == 403 and body["reason"] == "Forbidden"
    assert body["message"] == (
        f'configmaps "late" is forbidden: unable to create new content in namespace {namespace} '
        "because it is being terminated")
    call(home, "PATCH", cm_path(namespace, "held"), {"metadata": {"finalizers": None}},
         content_type=MERGE)


def test_namespaces_get_the_kubernetes_finalizer_and_phase_active(home, namespace) -> None:
    ns = call(home, "GET", f"/api/v1/namespaces/{namespace}")[1]
    assert ns["spec"]["finalizers"] == ["kubernetes"]
    assert ns["status"]["phase"] == "Active"
    assert ns["metadata"]["labels"]["kubernetes.io/metadata.name"] == namespace


def test_annotation_keys_are_validated(home, namespace) -> None:
    status, body = call(home, "POST", cm_path(namespace),
                        {"metadata": {"name": "n", "annotations": {"bad key": "v"}}})
    assert status == 422
    assert 'metadata.annotations: Invalid value: "bad key": name part must consist of' in \
        body["message"]


def test_an_owner_reference_needs_a_uid(home, namespace) -> None:
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": "o"}
    status, body = call(home, "POST", cm_path(namespace),
                        {"metadata": {"name": "r", "ownerReferences": [reference]}})
    assert status == 422
    assert 'metadata.ownerReferences.uid: Invalid value: "": uid must not be empty' in (
        body["message"]), body["message"]


def test_owner_references_are_validated(home, namespace) -> None:
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": "o"}
    controllers = [{**reference, "name": n, "uid": f"00000000-0000-0000-0000-00000000000{i}",
                    "controller": True} for i, n in enumerate(("a", "b"))]
    status, body = call(home, "POST", cm_path(namespace),
                        {"metadata": {"name": "r", "ownerReferences": controllers}})
    assert status == 422
    assert ('Only one reference can have Controller set to true. Found "true" in references for '
            "ConfigMap/a and ConfigMap/b") in body["message"]


def test_finalizer_names_must_be_qualified_names(home, namespace) -> None:
    status, body = call(home, "POST", cm_path(namespace),
                        {"metadata": {"name": "f", "finalizers": ["not a name"]}})
    assert status == 422
    assert 'metadata.finalizers: Invalid value: "not a name"' in body["message"]
