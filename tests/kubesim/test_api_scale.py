"""The scale subresource of Deployments and ReplicaSets: an autoscaling/v1 Scale view whose
writes change only the parent's spec.replicas, through the parent's update path (also on real
clusters)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.helpers import wait_for
from tests.kubesim.rest import JSON_PATCH, MERGE, STRATEGIC, call
from tests.kubesim.test_api_crd import CRDS, established, widgets
from tests.kubesim.test_auth_tokens import client_with_token, forbidden, request_token

OPTIMISTIC_LOCK = ("the object has been modified; please apply your changes to the latest "
                   "version and try again")


def deployment(name: str, replicas: int = 0) -> dict[str, Any]:
    """No replicas by default, so no controller writes the object once it has settled."""
    labels = {"app": name, "tier": "front"}
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name},
                         "matchExpressions": [{"key": "tier", "operator": "In",
                                               "values": ["front", "edge"]}]},
            "template": {"metadata": {"labels": labels}, "spec": {
                "containers": [{"name": "app", "image": "nginx:1.25"}]}},
        },
    }


def settled_deployment(apps: client.AppsV1Api, namespace: str, name: str) -> Any:
    """The Deployment once its controller has observed its latest generation."""
    def observed() -> Any:
        found = apps.read_namespaced_deployment(name, namespace)
        return found if found.status.observed_generation == found.metadata.generation else None

    return wait_for(observed, timeout=30)


def scale_path(namespace: str, plural: str, name: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/{plural}/{name}/scale"


@pytest.fixture
def apps(home) -> client.AppsV1Api:
    return client.AppsV1Api(home.api_client)


@pytest.fixture
def web(apps, namespace) -> Any:
    apps.create_namespaced_deployment(namespace, deployment("web"))
    return settled_deployment(apps, namespace, "web")


def test_a_scale_shows_the_parents_identity_replicas_and_selector(home, namespace, web) -> None:
    status, scale = call(home, "GET", scale_path(namespace, "deployments", "web"))
    assert status == 200
    assert (scale["apiVersion"], scale["kind"]) == ("autoscaling/v1", "Scale")
    meta = web.metadata
    assert scale["metadata"]["name"] == "web"
    assert scale["metadata"]["namespace"] == namespace
    assert scale["metadata"]["uid"] == meta.uid
    assert scale["metadata"]["resourceVersion"] == meta.resource_version
    assert "creationTimestamp" in scale["metadata"]
    assert scale["spec"] == {}  # replicas 0 is omitted, as omitempty drops it
    # the selector rendered as a string, requirements sorted by key
    assert scale["status"]["selector"] == "app=web,tier in (edge,front)"


def test_patching_the_scale_changes_only_spec_replicas_and_bumps_generation(apps, namespace,
                                                                           web) -> None:
    scale = apps.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": 2}})
    assert scale.spec.replicas == 2
    after = apps.read_namespaced_deployment("web", namespace)
    assert after.spec.replicas == 2
    assert after.metadata.generation == web.metadata.generation + 1
    assert after.spec.template == web.spec.template
    assert scale.metadata.resource_version != web.metadata.resource_version


def test_replacing_the_scale_with_its_current_version_succeeds(apps, namespace, web) -> None:
    scale = apps.read_namespaced_deployment_scale("web", namespace)
    scale.spec.replicas = 1
    replaced = apps.replace_namespaced_deployment_scale("web", namespace, scale)
    assert replaced.spec.replicas == 1
    assert apps.read_namespaced_deployment("web", namespace).spec.replicas == 1


def test_replacing_the_scale_from_a_stale_version_is_409_on_the_parent(home, apps, namespace,
                                                                        web) -> None:
    stale = apps.read_namespaced_deployment_scale("web", namespace)
    apps.patch_namespaced_deployment("web", namespace, {"metadata": {"labels": {"x": "y"}}})
    stale.spec.replicas = 3
    with pytest.raises(ApiException) as refused:
        apps.replace_namespaced_deployment_scale("web", namespace, stale)
    assert refused.value.status == 409
    status, body = call(home, "PUT", scale_path(namespace, "deployments", "web"),
                        client.ApiClient().sanitize_for_serialization(stale))
    assert (status, body["reason"]) == (409, "Conflict")
    assert body["message"] == (
        f'Operation cannot be fulfilled on deployments.apps "web": {OPTIMISTIC_LOCK}')
    assert apps.read_namespaced_deployment("web", namespace).spec.replicas == 0


@pytest.mark.since("1.31", "the scale subresource as v1.31's registry serves it; v1.24 differs")
def test_a_scale_without_resource_version_is_an_unconditional_update(apps, namespace,
                                                                     web) -> None:
    scale = apps.replace_namespaced_deployment_scale(
        "web", namespace, {"metadata": {"name": "web"}, "spec": {"replicas": 4}})
    assert scale.spec.replicas == 4


def test_negative_replicas_are_422_invalid_on_the_scale(home, namespace, web) -> None:
    status, body = call(home, "PATCH", scale_path(namespace, "deployments", "web"),
                        {"spec": {"replicas": -1}}, content_type=MERGE)
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["message"] == ('Scale.autoscaling "web" is invalid: spec.replicas: '
                               "Invalid value: -1: must be greater than or equal to 0")


def test_the_scale_of_a_missing_deployment_is_404_on_deployments(home, namespace) -> None:
    status, body = call(home, "GET", scale_path(namespace, "deployments", "nope"))
    assert (status, body["reason"]) == (404, "NotFound")
    # ScaleREST names the subresource (apps.Resource("deployments/scale"))
    assert body["message"] == 'deployments/scale.apps "nope" not found'


def test_a_dry_run_scale_leaves_the_deployment_alone(home, apps, namespace, web) -> None:
    status, scale = call(home, "PATCH", scale_path(namespace, "deployments", "web"),
                         {"spec": {"replicas": 5}}, content_type=STRATEGIC,
                         query={"dryRun": "All"})
    assert (status, scale["spec"]["replicas"]) == (200, 5)
    assert apps.read_namespaced_deployment("web", namespace).spec.replicas == 0


def test_a_scale_write_is_a_modified_event_on_the_parent(apps, namespace, web) -> None:
    apps.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": 2}})
    events = watch.Watch().stream(
        apps.list_namespaced_deployment, namespace, field_selector="metadata.name=web",
        resource_version=web.metadata.resource_version, timeout_seconds=10)
    first = next(events)
    assert first["type"] == "MODIFIED"
    assert first["object"].spec.replicas == 2
    events.close()


def test_replica_sets_serve_scale_too(home, apps, namespace) -> None:
    _, created = call(home, "POST", f"/apis/apps/v1/namespaces/{namespace}/replicasets",
                      {"metadata": {"name": "rs"}, "spec": deployment("rs")["spec"]})
    scale = apps.read_namespaced_replica_set_scale("rs", namespace)
    assert scale.metadata.uid == created["metadata"]["uid"]
    assert scale.status.selector == "app=rs,tier in (edge,front)"
    patched = apps.patch_namespaced_replica_set_scale("rs", namespace, {"spec": {"replicas": 1}})
    assert patched.spec.replicas == 1
    _, after = call(home, "GET", f"/apis/apps/v1/namespaces/{namespace}/replicasets/rs")
    assert after["spec"]["replicas"] == 1


def test_rbac_checks_the_request_verb_on_the_scale_subresource(home, namespace, web) -> None:
    """kubectl scale PATCHes deployments/scale: a grant of patch on it is enough, and it grants
    neither update on it nor patch on the deployment itself."""
    rbac = client.RbacAuthorizationV1Api(home.api_client)
    home.core.create_namespaced_service_account(namespace, {"metadata": {"name": "scaler"}})
    rbac.create_namespaced_role(namespace, {"metadata": {"name": "scaler"}, "rules": [
        {"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["patch"]}]})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": "scaler"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "scaler"},
        "subjects": [{"kind": "ServiceAccount", "name": "scaler", "namespace": namespace}]})
    token = request_token(home, namespace, "scaler").status.token
    scaler = client.AppsV1Api(client_with_token(home, token))
    patch = {"spec": {"replicas": 1}}
    wait_for(lambda: scaler.patch_namespaced_deployment_scale("web", namespace, patch),
             timeout=10, message="the RoleBinding never took effect")
    refused = forbidden(lambda: scaler.replace_namespaced_deployment_scale(
        "web", namespace, {"metadata": {"name": "web"}, "spec": {"replicas": 2}}))
    assert 'cannot update resource "deployments/scale" in API group "apps"' in refused["message"]
    forbidden(lambda: scaler.patch_namespaced_deployment("web", namespace, patch))


SCALABLE_SCHEMA = {"type": "object", "properties": {
    "spec": {"type": "object", "properties": {
        "replicas": {"type": "integer", "minimum": 0}, "size": {"type": "string"}}},
    "status": {"type": "object", "properties": {
        "replicas": {"type": "integer"}, "selector": {"type": "string"}}},
}}


@pytest.fixture
def scalable(home) -> Iterator[str]:
    """The group of an established CRD (unique per test) whose `widgets` declare scale."""
    group = f"s{uuid.uuid4().hex[:8]}.example.com"
    status, body = call(home, "POST", CRDS, {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": SCALABLE_SCHEMA},
                               "subresources": {"status": {}, "scale": {
                                   "specReplicasPath": ".spec.replicas",
                                   "statusReplicasPath": ".status.replicas",
                                   "labelSelectorPath": ".status.selector"}}}]}})
    assert status == 201, body
    wait_for(lambda: established(home, f"widgets.{group}"), 60, "CRD not established")
    wait_for(lambda: call(home, "GET", f"/apis/{group}/v1")[0] == 200, 60, "not served")
    yield group
    call(home, "DELETE", f"{CRDS}/widgets.{group}")


def custom_widget(home, group: str, namespace: str, name: str, spec: dict[str, Any]) -> Any:
    path = widgets(group, namespace)
    status, created = call(home, "POST", path, {
        "apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": name},
        "spec": spec})
    assert status == 201, created
    status, with_status = call(home, "PUT", f"{path}/{name}/status", {
        **created, "status": {"replicas": 1, "selector": "app=w"}})
    assert status == 200, with_status
    return with_status


def test_a_custom_resource_scale_reads_the_crds_paths(home, scalable, namespace) -> None:
    created = custom_widget(home, scalable, namespace, "w", {"replicas": 2, "size": "L"})
    status, scale = call(home, "GET", widgets(scalable, namespace, "w") + "/scale")
    assert status == 200, scale
    assert (scale["apiVersion"], scale["kind"]) == ("autoscaling/v1", "Scale")
    assert scale["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 1, "selector": "app=w"}
    resources = {r["name"] for r in call(home, "GET", f"/apis/{scalable}/v1")[1]["resources"]}
    assert "widgets/scale" in resources


def test_a_custom_resource_scale_write_sets_only_the_spec_replicas_path(home, scalable,
                                                                       namespace) -> None:
    created = custom_widget(home, scalable, namespace, "w", {"replicas": 2, "size": "L"})
    status, scale = call(home, "PATCH", widgets(scalable, namespace, "w") + "/scale",
                         {"spec": {"replicas": 5}}, content_type=MERGE)
    assert (status, scale["spec"]["replicas"]) == (200, 5), scale
    after = call(home, "GET", widgets(scalable, namespace, "w"))[1]
    assert after["spec"] == {"replicas": 5, "size": "L"}
    assert after["status"] == created["status"]
    assert after["metadata"]["generation"] == created["metadata"]["generation"] + 1


@pytest.mark.since("1.31", "the scale subresource as v1.31's registry serves it; v1.24 differs")
def test_a_custom_resource_scale_is_validated_by_the_crd_schema(home, scalable,
                                                                namespace) -> None:
    custom_widget(home, scalable, namespace, "w", {"replicas": 2})
    status, body = call(home, "PATCH", widgets(scalable, namespace, "w") + "/scale",
                        {"spec": {"replicas": -1}}, content_type=MERGE)
    # the CRD's schema, then the scale subresource's own check of the replicas path
    assert (status, body["reason"], body["message"]) == (422, "Invalid", (
        f'Widget.{scalable} "w" is invalid: [spec.replicas: Invalid value: -1: spec.replicas in '
        "body should be greater than or equal to 0, .spec.replicas: Invalid value: -1: should "
        "be a non-negative integer]"))


def test_a_custom_resource_status_write_keeps_the_scale_status_replicas_non_negative(
        home, scalable, namespace) -> None:
    """The CRD's schema lets status.replicas be any integer; the scale subresource's own
    validation (ValidateScaleStatus) refuses a negative one on a status write."""
    created = custom_widget(home, scalable, namespace, "w", {"replicas": 2})
    status, body = call(home, "PUT", widgets(scalable, namespace, "w") + "/status", {
        **created, "status": {"replicas": -1, "selector": "app=w"}})
    assert (status, body["message"]) == (422, (
        f'Widget.{scalable} "w" is invalid: .status.replicas: Invalid value: -1: should be a '
        "non-negative integer")), body


@pytest.mark.since("1.31", "the scale subresource as v1.31's registry serves it; v1.24 differs")
def test_a_custom_resource_without_replicas_needs_them_set_through_scale(home, scalable,
                                                                        namespace) -> None:
    custom_widget(home, scalable, namespace, "w", {"size": "S"})
    path = widgets(scalable, namespace, "w") + "/scale"
    status, body = call(home, "GET", path)
    assert (status, body["reason"], body["message"]) == (500, "InternalError", (
        'Internal error occurred: the spec replicas field ".spec.replicas" does not exist'))
    status, body = call(home, "PATCH", path, {"metadata": {"labels": {"a": "b"}}},
                        content_type=MERGE)
    assert (status, body["reason"]) == (400, "BadRequest")
    assert body["message"] == 'the spec replicas field ".spec.replicas" cannot be empty'
    status, scale = call(home, "PATCH", path, {"spec": {"replicas": 3}}, content_type=MERGE)
    assert (status, scale["spec"]) == (200, {"replicas": 3})


def test_a_custom_resource_scale_takes_no_strategic_merge_patch(home, scalable,
                                                               namespace) -> None:
    custom_widget(home, scalable, namespace, "w", {"replicas": 2})
    status, body = call(home, "PATCH", widgets(scalable, namespace, "w") + "/scale",
                        {"spec": {"replicas": 3}}, content_type=STRATEGIC)
    assert (status, body["reason"]) == (415, "UnsupportedMediaType")
    status, scale = call(home, "PATCH", widgets(scalable, namespace, "w") + "/scale",
                         [{"op": "replace", "path": "/spec/replicas", "value": 3}],
                         content_type=JSON_PATCH)
    assert (status, scale["spec"]) == (200, {"replicas": 3})
