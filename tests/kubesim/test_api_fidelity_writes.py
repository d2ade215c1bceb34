"""Write and read details controllers notice, checked against the real kube-apiserver's source:
no-op writes are short-circuited (no new resourceVersion, no event), metadata formats, which
kinds carry metadata.generation, create-on-update, 404 wording, DELETE response bodies, list
order by storage key, selector error messages."""

from __future__ import annotations

import re
import uuid

import pytest

from tests.kubesim.rest import JSON_PATCH, MERGE, STRATEGIC, call, stream
from tests.kubesim.test_api_watch import cms
from tests.kubesim.test_api_writes import ns_path, pod

TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
UID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def events_until_marker(cluster, namespace: str, since: str) -> list[tuple[str, str]]:
    """Every event after `since` up to the creation of a marker ConfigMap (created here)."""
    call(cluster, "POST", cms(namespace), {"metadata": {"name": "marker"}})
    seen: list[tuple[str, str]] = []
    for event in stream(cluster, cms(namespace), {"resourceVersion": since,
                                                  "timeoutSeconds": "10"}):
        seen.append((event["type"], event["object"]["metadata"]["name"]))
        if seen[-1] == ("ADDED", "marker"):
            break
    return seen


def test_writes_that_change_nothing_keep_the_resource_version_and_emit_nothing(
        home, namespace) -> None:
    created = call(home, "POST", cms(namespace), {"metadata": {"name": "a", "labels": {"x": "1"}},
                                                  "data": {"k": "v"}})[1]
    version = created["metadata"]["resourceVersion"]
    writes = [
        call(home, "PUT", cms(namespace, "a"), created),
        call(home, "PATCH", cms(namespace, "a"), {"data": {"k": "v"}}, content_type=MERGE),
        call(home, "PATCH", cms(namespace, "a"), {"metadata": {"labels": {"x": "1"}}},
             content_type=STRATEGIC),
        call(home, "PATCH", cms(namespace, "a"), [{"op": "test", "path": "/data/k",
                                                   "value": "v"}], content_type=JSON_PATCH),
    ]
    assert [(status, body["metadata"]["resourceVersion"]) for status, body in writes] == [
        (200, version)] * 4
    assert events_until_marker(home, namespace, version) == [("ADDED", "marker")]


def test_a_status_write_that_changes_nothing_keeps_the_resource_version(home,
                                                                        namespace) -> None:
    call(home, "POST", ns_path(namespace, "pods"), pod("p"))
    current = call(home, "GET", ns_path(namespace, "pods", "p"))[1]
    status, body = call(home, "PUT", ns_path(namespace, "pods", "p") + "/status", current)
    assert status == 200
    assert body["metadata"]["resourceVersion"] == current["metadata"]["resourceVersion"]


def test_metadata_formats(home, namespace) -> None:
    call(home, "POST", cms(namespace), {"metadata": {"name": "f", "finalizers": ["x.io/f"]}})
    deleting = call(home, "DELETE", cms(namespace, "f"))[1]
    meta = deleting["metadata"]
    assert TIMESTAMP.match(meta["creationTimestamp"]) and TIMESTAMP.match(
        meta["deletionTimestamp"])
    assert UID.match(meta["uid"])
    assert "selfLink" not in meta
    call(home, "PATCH", cms(namespace, "f"), {"metadata": {"finalizers": None}},
         content_type=MERGE)


def test_only_kinds_whose_strategy_sets_it_carry_a_generation(home, namespace) -> None:
    configmap = call(home, "POST", cms(namespace), {"metadata": {"name": "g"}})[1]
    assert "generation" not in configmap["metadata"]
    changed = call(home, "PATCH", cms(namespace, "g"), {"data": {"k": "v"}},
                   content_type=MERGE)[1]
    assert "generation" not in changed["metadata"]
    assert "generation" not in call(home, "GET", f"/api/v1/namespaces/{namespace}")[1][
        "metadata"]


@pytest.mark.since("1.33", "pods carry a generation that spec changes bump")
def test_pods_carry_a_generation(home, namespace) -> None:
    created = call(home, "POST", ns_path(namespace, "pods"), pod("p"))[1]
    assert created["metadata"]["generation"] == 1
    changed = call(home, "PATCH", ns_path(namespace, "pods", "p"),
                   {"spec": {"activeDeadlineSeconds": 100}}, content_type=MERGE)[1]
    assert changed["metadata"]["generation"] == 2


def test_writing_a_missing_object_is_404_with_the_real_wording(home, namespace) -> None:
    for method, body, content_type in (
            ("PUT", {"metadata": {"name": "nope"}}, "application/json"),
            ("PATCH", {"data": {"k": "v"}}, MERGE)):
        status, reply = call(home, method, cms(namespace, "nope"), body,
                             content_type=content_type)
        assert (status, reply["reason"], reply["message"]) == (
            404, "NotFound", 'configmaps "nope" not found')
        assert reply["details"] == {"name": "nope", "kind": "configmaps"}


def test_put_creates_only_for_kinds_that_allow_create_on_update(home, namespace) -> None:
    lease = {"metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}}
    role = {"metadata": {"name": "r"}, "rules": []}
    event = {"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p",
                                                          "namespace": namespace}}
    for plural, group_version, body in (("leases", "coordination.k8s.io/v1", lease),
                                        ("roles", "rbac.authorization.k8s.io/v1", role),
                                        ("events", "v1", event)):
        path = ns_path(namespace, plural, body["metadata"]["name"], group_version)
        assert call(home, "PUT", path, body)[0] == 201, plural
    for plural, body in (("configmaps", {"metadata": {"name": "c"}}),
                         ("serviceaccounts", {"metadata": {"name": "s"}})):
        assert call(home, "PUT", ns_path(namespace, plural, "c" if plural == "configmaps"
                                         else "s"), body)[0] == 404, plural


def test_delete_answers_a_status_an_object_or_the_pending_object_as_the_store_does(
        home, namespace) -> None:
    uid = call(home, "POST", cms(namespace), {"metadata": {"name": "gone"}})[1]["metadata"][
        "uid"]
    status, body = call(home, "DELETE", cms(namespace, "gone"))
    assert status == 200
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "details": {"name": "gone", "kind": "configmaps", "uid": uid}}
    call(home, "POST", ns_path(namespace, "pods"), pod("p"))
    status, body = call(home, "DELETE", ns_path(namespace, "pods", "p"))
    # pods are ReturnDeletedObject: the (gone) pod itself
    assert (status, body["kind"], body["metadata"]["name"]) == (200, "Pod", "p")
    claim = {"metadata": {"name": "c"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    call(home, "POST", ns_path(namespace, "persistentvolumeclaims"), claim)
    status, body = call(home, "DELETE", ns_path(namespace, "persistentvolumeclaims", "c"))
    assert (status, body["kind"]) == (200, "PersistentVolumeClaim")  # ReturnDeletedObject too
    call(home, "POST", cms(namespace), {"metadata": {"name": "kept", "finalizers": ["x.io/f"]}})
    status, body = call(home, "DELETE", cms(namespace, "kept"),
                        {"kind": "DeleteOptions", "apiVersion": "v1", "orphanDependents": False})
    assert status == 202  # not gone yet, and the caller asked for cascading deletion
    assert (body["kind"], bool(body["metadata"]["deletionTimestamp"])) == ("ConfigMap", True)
    call(home, "PATCH", cms(namespace, "kept"), {"metadata": {"finalizers": None}},
         content_type=MERGE)


def test_lists_are_in_storage_key_order_at_the_current_resource_version(home) -> None:
    base = f"o-{uuid.uuid4().hex[:8]}"
    created = []
    for name in (base, f"{base}-b"):  # "<base>-b/..." sorts before "<base>/..." in etcd
        home.core.create_namespace({"metadata": {"name": name}})
        created.append(name)
    try:
        for name in created:
            call(home, "POST", cms(name), {"metadata": {"name": "item", "labels": {base: "1"}}})
        listed = call(home, "GET", "/api/v1/configmaps", query={"labelSelector": base})[1]
        assert [i["metadata"]["namespace"] for i in listed["items"]] == [f"{base}-b", base]
        latest = max(int(i["metadata"]["resourceVersion"]) for i in listed["items"])
        assert int(listed["metadata"]["resourceVersion"]) >= latest
        page = call(home, "GET", "/api/v1/configmaps", query={"labelSelector": base,
                                                              "limit": "1"})[1]
        rest = call(home, "GET", "/api/v1/configmaps", query={
            "labelSelector": base, "limit": "1", "continue": page["metadata"]["continue"]})[1]
        assert [i["metadata"]["namespace"] for i in page["items"] + rest["items"]] == [
            f"{base}-b", base]
    finally:
        for name in created:
            home.core.delete_namespace(name)


def test_selector_errors_carry_the_real_messages(home, namespace) -> None:
    status, body = call(home, "GET", cms(namespace), query={"labelSelector": "a=b=c"})
    assert (status, body["reason"], body["message"]) == (
        400, "BadRequest", "found '=', expected: ',' or 'end of string'")
    # kinds without their own field label conversion fall back to the metadata-only default
    status, body = call(home, "GET", cms(namespace), query={"fieldSelector": "data.k=v"})
    assert (status, body["reason"], body["message"]) == (
        400, "BadRequest",
        '"data.k" is not a known field selector: only "metadata.name", "metadata.namespace"')
    status, body = call(home, "GET", ns_path(namespace, "pods"),
                        query={"fieldSelector": "spec.priority=1"})
    assert (status, body["message"]) == (400, "field label not supported: spec.priority")


def test_clients_may_send_managed_fields_back(home, namespace) -> None:
    """Clients that GET then PUT send the server's managedFields back; that must keep working
    (kubesim keeps what clients send and records no field managers of its own)."""
    entry = {"manager": "annex-test", "operation": "Update", "apiVersion": "v1",
             "time": "2024-01-01T00:00:00Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:data": {".": {}, "f:k": {}}}}
    status, created = call(home, "POST", cms(namespace), {
        "metadata": {"name": "m", "managedFields": [entry]}, "data": {"k": "v"}})
    assert status == 201, created
    current = call(home, "GET", cms(namespace, "m"))[1]
    status, updated = call(home, "PUT", cms(namespace, "m"), {**current, "data": {"k": "w"}})
    assert (status, updated["data"]) == (200, {"k": "w"})


def test_strategic_merge_patch_merges_ports_conditions_and_volumes_by_their_keys(
        home, namespace) -> None:
    services = ns_path(namespace, "services")
    call(home, "POST", services, {"metadata": {"name": "s"}, "spec": {
        "ports": [{"name": "a", "port": 80, "targetPort": 80}]}})
    body = call(home, "PATCH", f"{services}/s", {"spec": {"ports": [
        {"name": "b", "port": 81, "targetPort": 81}]}}, content_type=STRATEGIC)[1]
    assert sorted(p["port"] for p in body["spec"]["ports"]) == [80, 81]  # merged by port

    call(home, "POST", ns_path(namespace, "pods"), pod("p"))
    for kind in ("example.com/a", "example.com/b"):
        status, body = call(home, "PATCH", ns_path(namespace, "pods", "p") + "/status",
                            {"status": {"conditions": [{"type": kind, "status": "True"}]}},
                            content_type=STRATEGIC)
        assert status == 200, body
    assert {c["type"] for c in body["status"]["conditions"]} >= {
        "example.com/a", "example.com/b"}  # merged by type

    deployments = ns_path(namespace, "deployments", group_version="apps/v1")
    labels = {"app": "v"}
    template = {"metadata": {"labels": labels}, "spec": {
        "containers": [{"name": "c", "image": "c:1", "ports": [{"containerPort": 80}]}],
        "volumes": [{"name": "x", "emptyDir": {}}]}}
    call(home, "POST", deployments, {"metadata": {"name": "v"}, "spec": {
        "selector": {"matchLabels": labels}, "template": template}})
    body = call(home, "PATCH", f"{deployments}/v", {"spec": {"template": {"spec": {
        "containers": [{"name": "c", "ports": [{"containerPort": 81}]}],
        "volumes": [{"name": "y", "emptyDir": {}}]}}}}, content_type=STRATEGIC)[1]
    spec = body["spec"]["template"]["spec"]
    assert sorted(v["name"] for v in spec["volumes"]) == ["x", "y"]  # merged by name
    assert sorted(p["containerPort"] for p in spec["containers"][0]["ports"]) == [80, 81]


def test_a_pod_update_without_resource_version_is_unconditional(home, namespace) -> None:
    call(home, "POST", ns_path(namespace, "pods"), pod("p"))
    current = call(home, "GET", ns_path(namespace, "pods", "p"))[1]
    del current["metadata"]["resourceVersion"]
    current["spec"]["containers"][0]["image"] = "nginx:2"
    status, body = call(home, "PUT", ns_path(namespace, "pods", "p"), current)
    assert (status, body["spec"]["containers"][0]["image"]) == (200, "nginx:2")


def test_a_deleted_namespace_turns_terminating_without_a_grace_period(home, namespace) -> None:
    status, body = call(home, "DELETE", f"/api/v1/namespaces/{namespace}")
    assert (status, body["kind"], body["status"]["phase"]) == (200, "Namespace", "Terminating")
    assert TIMESTAMP.match(body["metadata"]["deletionTimestamp"])
    # namespace storage's Delete sets only the timestamp and the phase (no generic grace)
    assert "deletionGracePeriodSeconds" not in body["metadata"]


def test_a_body_in_an_unknown_format_is_415(home, namespace) -> None:
    status, body = call(home, "POST", cms(namespace), {"metadata": {"name": "t"}},
                        content_type="text/plain")
    assert (status, body["reason"]) == (415, "UnsupportedMediaType")
    assert body["message"].startswith("the body of the request was in an unknown format - "
                                      "accepted media types include: application/json")
