"""Writes: create, optimistic concurrency, the three patch types, status subresource separation,
pod spec immutability, pods/binding and dry runs."""

from __future__ import annotations

import pytest

from tests.kubesim.rest import JSON_PATCH, MERGE, STRATEGIC, call


def ns_path(namespace: str, plural: str, name: str = "", group_version: str = "v1") -> str:
    prefix = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    return f"{prefix}/namespaces/{namespace}/{plural}" + (f"/{name}" if name else "")


def pod(name: str, image: str = "nginx:1", **spec: object) -> dict:
    """A pod no scheduler picks up (schedulerName names none), so tests bind it themselves."""
    return {"metadata": {"name": name}, "spec": {
        "containers": [{"name": "c", "image": image}], "schedulerName": "none", **spec}}


def test_creating_an_existing_name_is_409_already_exists(home, namespace) -> None:
    call(home, "POST", ns_path(namespace, "configmaps"), {"metadata": {"name": "a"}})
    status, body = call(home, "POST", ns_path(namespace, "configmaps"), {"metadata": {"name": "a"}})
    assert (status, body["reason"]) == (409, "AlreadyExists")
    assert body["message"] == 'configmaps "a" already exists'


def test_an_update_from_a_stale_resource_version_is_409_conflict(home, namespace) -> None:
    path = ns_path(namespace, "configmaps", "a")
    created = call(home, "POST", ns_path(namespace, "configmaps"), {"metadata": {"name": "a"}})[1]
    call(home, "PUT", path, {**created, "data": {"v": "1"}})
    status, body = call(home, "PUT", path, {**created, "data": {"v": "2"}})
    assert (status, body["reason"]) == (409, "Conflict")
    assert body["message"] == (
        'Operation cannot be fulfilled on configmaps "a": the object has been modified; please '
        "apply your changes to the latest version and try again")


def test_an_update_without_resource_version_is_unconditional_for_most_kinds(home,
                                                                             namespace) -> None:
    call(home, "POST", ns_path(namespace, "configmaps"), {"metadata": {"name": "a"}})
    status, body = call(home, "PUT", ns_path(namespace, "configmaps", "a"),
                        {"metadata": {"name": "a"}, "data": {"v": "1"}})
    assert status == 200 and body["data"] == {"v": "1"}


def test_a_lease_update_must_carry_a_resource_version(home, namespace) -> None:
    path = ns_path(namespace, "leases", group_version="coordination.k8s.io/v1")
    call(home, "POST", path, {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}})
    status, body = call(home, "PUT", f"{path}/l",
                        {"metadata": {"name": "l"}, "spec": {"holderIdentity": "b"}})
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["message"] == (
        'leases.coordination.k8s.io "l" is invalid: metadata.resourceVersion: Invalid value: '
        "0x0: must be specified for an update")


def test_merge_patch_merges_maps_and_null_deletes(home, namespace) -> None:
    call(home, "POST", ns_path(namespace, "configmaps"),
         {"metadata": {"name": "a"}, "data": {"keep": "1", "drop": "2"}})
    status, body = call(home, "PATCH", ns_path(namespace, "configmaps", "a"),
                        {"data": {"drop": None, "new": "3"}}, content_type=MERGE)
    assert status == 200 and body["data"] == {"keep": "1", "new": "3"}


def test_json_patch_applies_operations_and_a_failed_test_is_422(home, namespace) -> None:
    path = ns_path(namespace, "configmaps", "a")
    call(home, "POST", ns_path(namespace, "configmaps"),
         {"metadata": {"name": "a"}, "data": {"k": "1"}})
    status, body = call(home, "PATCH", path, [{"op": "replace", "path": "/data/k", "value": "2"}],
                        content_type=JSON_PATCH)
    assert status == 200 and body["data"] == {"k": "2"}
    status, body = call(home, "PATCH", path, [{"op": "test", "path": "/data/k", "value": "9"}],
                        content_type=JSON_PATCH)
    assert status == 422


def test_strategic_merge_patch_merges_containers_by_name(home, namespace) -> None:
    path = ns_path(namespace, "deployments", group_version="apps/v1")
    labels = {"app": "w"}
    call(home, "POST", path, {"metadata": {"name": "w"}, "spec": {
        "selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
            "containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}}}})
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "b:2"}]}}}}
    status, body = call(home, "PATCH", f"{path}/w", patch, content_type=STRATEGIC)
    assert status == 200
    containers = body["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [("a", "a:1"), ("b", "b:2")]


def test_main_resource_writes_ignore_status_and_status_writes_leave_spec(home, namespace) -> None:
    path = ns_path(namespace, "services")
    created = call(home, "POST", path, {"metadata": {"name": "s"}, "spec": {
        "type": "LoadBalancer", "ports": [{"port": 80}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}})[1]
    assert created["status"] == {"loadBalancer": {}}
    ingress = {"loadBalancer": {"ingress": [{"ip": "5.6.7.8"}]}}
    plain = call(home, "POST", path, {"metadata": {"name": "plain"}, "spec": {
        "ports": [{"port": 80}]}})[1]
    status, body = call(home, "PATCH", f"{path}/plain/status", {"status": ingress},
                        content_type=MERGE)
    assert (status, body["message"]) == (422, (
        'Service "plain" is invalid: status.loadBalancer.ingress: Forbidden: may only be used '
        "when `spec.type` is 'LoadBalancer'")), plain
    status, body = call(home, "PATCH", f"{path}/s", {"status": ingress}, content_type=MERGE)
    assert status == 200 and body["status"] == {"loadBalancer": {}}
    status, body = call(home, "PATCH", f"{path}/s/status",
                        {"status": ingress, "spec": {"ports": [{"port": 81}]}},
                        content_type=MERGE)
    assert status == 200
    assert [i["ip"] for i in body["status"]["loadBalancer"]["ingress"]] == ["5.6.7.8"]
    assert body["spec"]["ports"][0]["port"] == 80


@pytest.mark.since("1.30", "LoadBalancerIPMode is on by default")
def test_a_load_balancer_ingress_ip_is_defaulted_to_ip_mode_vip(home, namespace) -> None:
    path = ns_path(namespace, "services")
    call(home, "POST", path, {"metadata": {"name": "s"}, "spec": {
        "type": "LoadBalancer", "ports": [{"port": 80}]}})
    ingress = [{"ip": "5.6.7.8"}, {"ip": "5.6.7.9", "ipMode": "Proxy"}, {"hostname": "lb.example"}]
    status, body = call(home, "PATCH", f"{path}/s/status",
                        {"status": {"loadBalancer": {"ingress": ingress}}}, content_type=MERGE)
    assert status == 200, body
    assert body["status"]["loadBalancer"]["ingress"] == [
        {"ip": "5.6.7.8", "ipMode": "VIP"}, {"ip": "5.6.7.9", "ipMode": "Proxy"},
        {"hostname": "lb.example"}]


def test_pod_status_writes_leave_spec_but_may_change_metadata(home, namespace) -> None:
    path = ns_path(namespace, "pods")
    call(home, "POST", path, pod("p"))
    status, body = call(home, "PATCH", f"{path}/p/status", {
        "metadata": {"labels": {"seen": "yes"}}, "spec": {"activeDeadlineSeconds": 5},
        "status": {"phase": "Running"}}, content_type=MERGE)
    assert status == 200
    assert body["status"]["phase"] == "Running"
    assert "activeDeadlineSeconds" not in body["spec"]
    assert body["metadata"]["labels"] == {"seen": "yes"}


def test_pod_spec_is_immutable_except_images_deadline_and_added_tolerations(home,
                                                                            namespace) -> None:
    path = ns_path(namespace, "pods")
    _, created = call(home, "POST", path, pod("p"))
    # admission added the default not-ready/unreachable tolerations; a strategic merge patch
    # replaces the whole list, so adding one means sending them too
    defaults = created["spec"].get("tolerations") or []
    status, body = call(home, "PATCH", f"{path}/p", {"spec": {"restartPolicy": "Never"}},
                        content_type=MERGE)
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["message"].startswith(
        'Pod "p" is invalid: spec: Forbidden: pod updates may not change fields other than '
        "`spec.containers[*].image`")
    allowed = {"spec": {
        "containers": [{"name": "c", "image": "nginx:2"}], "activeDeadlineSeconds": 60,
        "tolerations": [*defaults, {"key": "k", "operator": "Exists", "effect": "NoSchedule"}]}}
    status, body = call(home, "PATCH", f"{path}/p", allowed, content_type=STRATEGIC)
    assert status == 200, body
    assert body["spec"]["containers"][0]["image"] == "nginx:2"
    assert body["spec"]["activeDeadlineSeconds"] == 60
    status, body = call(home, "PATCH", f"{path}/p", {"spec": {"activeDeadlineSeconds": 90}},
                        content_type=MERGE)
    assert status == 422  # the deadline may only be set or shortened
    status, body = call(home, "PATCH", f"{path}/p", {"spec": {"tolerations": None}},
                        content_type=MERGE)
    assert status == 422  # tolerations may only be added


def test_binding_assigns_a_node_once(home, namespace) -> None:
    path = ns_path(namespace, "pods")
    call(home, "POST", path, pod("p"))
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"}}
    status, body = call(home, "POST", f"{path}/p/binding", binding)
    assert status == 201 and body["status"] == "Success"
    bound = call(home, "GET", f"{path}/p")[1]
    assert bound["spec"]["nodeName"] == "node-a"
    scheduled = [c for c in bound["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert scheduled and scheduled[0]["status"] == "True"
    status, body = call(home, "POST", f"{path}/p/binding",
                        {**binding, "target": {"kind": "Node", "name": "node-b"}})
    assert (status, body["reason"]) == (409, "Conflict")
    assert body["message"] == (
        'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node '
        '"node-a"')
    call(home, "DELETE", f"{path}/p", {"gracePeriodSeconds": 0})


def test_dry_run_validates_but_writes_nothing(home, namespace) -> None:
    path = ns_path(namespace, "configmaps")
    status, body = call(home, "POST", path, {"metadata": {"name": "dry"}},
                        query={"dryRun": "All"})
    assert status == 201 and body["metadata"]["name"] == "dry"
    assert call(home, "GET", f"{path}/dry")[0] == 404
    assert call(home, "POST", path, {"metadata": {"name": "BAD"}}, query={"dryRun": "All"})[0] \
        == 422
    call(home, "POST", path, {"metadata": {"name": "kept"}, "data": {"a": "1"}})
    status, body = call(home, "PATCH", f"{path}/kept", {"data": {"a": "2"}}, content_type=MERGE,
                        query={"dryRun": "All"})
    assert status == 200 and body["data"] == {"a": "2"}
    assert call(home, "GET", f"{path}/kept")[1]["data"] == {"a": "1"}
    assert call(home, "DELETE", f"{path}/kept", query={"dryRun": "All"})[0] == 200
    assert call(home, "GET", f"{path}/kept")[0] == 200


def test_secrets_default_to_opaque_and_fold_string_data_into_data(home, namespace) -> None:
    status, body = call(home, "POST", ns_path(namespace, "secrets"),
                        {"metadata": {"name": "s"}, "stringData": {"user": "admin"}})
    assert status == 201
    assert body["type"] == "Opaque"
    assert body["data"] == {"user": "YWRtaW4="} and "stringData" not in body
    status, body = call(home, "PATCH", ns_path(namespace, "secrets", "s"),
                        {"type": "kubernetes.io/tls"}, content_type=MERGE)
    assert status == 422 and "type: Invalid value" in body["message"]


def test_immutable_configmaps_keep_their_data(home, namespace) -> None:
    call(home, "POST", ns_path(namespace, "configmaps"),
         {"metadata": {"name": "frozen"}, "data": {"k": "v"}, "immutable": True})
    status, body = call(home, "PATCH", ns_path(namespace, "configmaps", "frozen"),
                        {"data": {"k": "w"}}, content_type=MERGE)
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["message"] == ('ConfigMap "frozen" is invalid: data: Forbidden: field is '
                               "immutable when `immutable` is set")


def test_an_update_carrying_another_uid_is_409(home, namespace) -> None:
    created = call(home, "POST", ns_path(namespace, "configmaps"), {"metadata": {"name": "u"}})[1]
    created["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
    status, body = call(home, "PUT", ns_path(namespace, "configmaps", "u"), created)
    assert (status, body["reason"]) == (409, "Conflict")
    assert "Precondition failed: UID in precondition: 00000000-0000-0000-0000-000000000000" in \
        body["message"]


def test_a_created_replicaset_reports_zero_replicas_in_its_status(home, namespace) -> None:
    """ReplicaSetStatus.replicas has no omitempty: the create response already carries it, and
    the typed client (which requires it) can read the answer."""
    from kubernetes import client

    apps = client.AppsV1Api(home.api_client)
    created = apps.create_namespaced_replica_set(namespace, {
        "metadata": {"name": "rs"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "rs"}},
                 "template": {"metadata": {"labels": {"app": "rs"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    assert created.status.replicas == 0


def test_a_patch_carrying_a_stale_resource_version_is_409_conflict(home, namespace) -> None:
    """A resourceVersion in a patch is a precondition (what guards a finalizer's removal
    decided from an older copy)."""
    path = ns_path(namespace, "configmaps", "a")
    created = call(home, "POST", ns_path(namespace, "configmaps"), {"metadata": {"name": "a"}})[1]
    stale = created["metadata"]["resourceVersion"]
    call(home, "PATCH", path, {"data": {"v": "1"}}, content_type=MERGE)
    status, body = call(home, "PATCH", path, {"metadata": {"resourceVersion": stale},
                                              "data": {"v": "2"}}, content_type=MERGE)
    assert (status, body["reason"]) == (409, "Conflict")
    current = call(home, "GET", path)[1]
    version = current["metadata"]["resourceVersion"]
    status, body = call(home, "PATCH", path, {"metadata": {"resourceVersion": version},
                                              "data": {"v": "2"}}, content_type=MERGE)
    assert status == 200 and body["data"] == {"v": "2"}
