"""CustomResourceDefinitions: served at once when created, established, validated, pruned and
defaulted per their structural schema, with a status subresource; removed when deleted."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.helpers import wait_for
from tests.kubesim.rest import MERGE, STRATEGIC, call

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "integer"},
                "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
    },
}


def definition(group: str, schema: dict | None = None) -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                      "shortNames": ["wd"], "categories": ["all"]},
            "versions": [{"name": "v1", "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": schema or SCHEMA},
                          "subresources": {"status": {}}}],
        },
    }


def established(cluster, name: str) -> bool:
    status, crd = call(cluster, "GET", f"{CRDS}/{name}")
    conditions = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions", [])}
    return status == 200 and conditions.get("Established") == "True" and \
        conditions.get("NamesAccepted") == "True"


@pytest.fixture
def group(home) -> Iterator[str]:
    """A CRD of its own group (unique per test), established; deleted afterwards."""
    group = f"g{uuid.uuid4().hex[:8]}.example.com"
    status, body = call(home, "POST", CRDS, definition(group))
    assert status == 201, body
    wait_for(lambda: established(home, f"widgets.{group}"), 60, "CRD not established")
    wait_for(lambda: call(home, "GET", f"/apis/{group}/v1")[0] == 200, 60, "not served")
    yield group
    call(home, "DELETE", f"{CRDS}/widgets.{group}")


def widgets(group: str, namespace: str, name: str = "") -> str:
    return f"/apis/{group}/v1/namespaces/{namespace}/widgets" + (f"/{name}" if name else "")


def widget(group: str, name: str, **spec: object) -> dict:
    return {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": name},
            "spec": {"size": 1, **spec}}


def test_a_created_crd_is_established_and_discoverable(home, group: str) -> None:
    crd = call(home, "GET", f"{CRDS}/widgets.{group}")[1]
    assert crd["status"]["acceptedNames"]["kind"] == "Widget"
    assert crd["status"]["storedVersions"] == ["v1"]
    resources = {r["name"]: r for r in call(home, "GET", f"/apis/{group}/v1")[1]["resources"]}
    assert resources["widgets"]["kind"] == "Widget"
    assert resources["widgets"]["namespaced"] is True
    assert resources["widgets"]["shortNames"] == ["wd"]
    assert resources["widgets"]["categories"] == ["all"]
    assert "widgets/status" in resources
    groups = [g["name"] for g in call(home, "GET", "/apis")[1]["groups"]]
    assert group in groups


def test_custom_resources_are_defaulted_and_pruned(home, group: str, namespace: str) -> None:
    body = widget(group, "w", unknown="dropped", free={"anything": {"goes": 1}})
    status, created = call(home, "POST", widgets(group, namespace), body)
    assert status == 201, created
    assert created["spec"] == {"size": 1, "color": "red", "free": {"anything": {"goes": 1}}}
    assert created["metadata"]["generation"] == 1
    listed = call(home, "GET", widgets(group, namespace))[1]
    assert listed["kind"] == "WidgetList"
    # custom resource lists carry apiVersion/kind on every item
    assert (listed["items"][0]["apiVersion"], listed["items"][0]["kind"]) == (
        f"{group}/v1", "Widget")


@pytest.mark.parametrize(("spec", "expected"), [
    ({"size": "big"}, 'spec.size: Invalid value: "string": spec.size in body must be of type '
                      'integer: "string"'),
    ({"size": None, "color": "red"}, "spec.size: Required value"),
    ({"color": "green"}, 'spec.color: Unsupported value: "green": supported values: "red", '
                         '"blue"'),
])
def test_custom_resources_are_validated_against_the_schema(home, group: str, namespace: str,
                                                           spec: dict, expected: str) -> None:
    body = widget(group, "bad", **spec)
    body["spec"] = {k: v for k, v in body["spec"].items() if v is not None}
    status, answer = call(home, "POST", widgets(group, namespace), body)
    assert (status, answer["reason"]) == (422, "Invalid")
    assert answer["message"].startswith(f'Widget.{group} "bad" is invalid: ')
    assert expected in answer["message"]


def test_the_status_subresource_separates_spec_and_status(home, group: str,
                                                          namespace: str) -> None:
    path = widgets(group, namespace, "w")
    created = call(home, "POST", widgets(group, namespace),
                   {**widget(group, "w"), "status": {"ready": True}})[1]
    assert "status" not in created  # create cannot set status
    status, body = call(home, "PATCH", path, {"status": {"ready": True}}, content_type=MERGE)
    assert status == 200 and "status" not in body
    status, body = call(home, "PATCH", f"{path}/status",
                        {"status": {"ready": True}, "spec": {"size": 9},
                         "metadata": {"labels": {"x": "y"}}}, content_type=MERGE)
    assert status == 200
    assert body["status"] == {"ready": True}
    assert body["spec"]["size"] == 1 and not body["metadata"].get("labels")
    assert body["metadata"]["generation"] == 1


def test_spec_changes_bump_the_generation(home, group: str, namespace: str) -> None:
    call(home, "POST", widgets(group, namespace), widget(group, "w"))
    body = call(home, "PATCH", widgets(group, namespace, "w"), {"spec": {"size": 2}},
                content_type=MERGE)[1]
    assert body["metadata"]["generation"] == 2


def test_strategic_merge_patch_on_a_custom_resource_is_415(home, group: str,
                                                           namespace: str) -> None:
    call(home, "POST", widgets(group, namespace), widget(group, "w"))
    status, body = call(home, "PATCH", widgets(group, namespace, "w"), {"spec": {"size": 2}},
                        content_type=STRATEGIC)
    assert (status, body["reason"]) == (415, "UnsupportedMediaType")
    assert body["message"].startswith(
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json")


def test_a_custom_resource_update_must_carry_a_resource_version(home, group: str,
                                                                namespace: str) -> None:
    call(home, "POST", widgets(group, namespace), widget(group, "w"))
    status, body = call(home, "PUT", widgets(group, namespace, "w"), widget(group, "w", size=3))
    assert (status, body["reason"]) == (422, "Invalid")
    assert "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update" in \
        body["message"]


def test_a_non_structural_schema_is_refused(home) -> None:
    group = f"g{uuid.uuid4().hex[:8]}.example.com"
    schema = {"type": "object", "properties": {"spec": {"properties": {"x": {"type": "string"}}}}}
    status, body = call(home, "POST", CRDS, definition(group, schema))
    assert (status, body["reason"]) == (422, "Invalid")
    # one version's schema is the CRD's (spec.validation once converted to the internal version)
    assert ("spec.validation.openAPIV3Schema.properties[spec].type: Required value: "
            "must not be empty for specified object fields") in body["message"]


def test_a_deleted_crd_stops_being_served_and_takes_its_resources(home, namespace) -> None:
    group = f"g{uuid.uuid4().hex[:8]}.example.com"
    call(home, "POST", CRDS, definition(group))
    wait_for(lambda: established(home, f"widgets.{group}"), 60, "CRD not established")
    wait_for(lambda: call(home, "POST", widgets(group, namespace), widget(group, "w"))[0] == 201,
             60, "custom resource not accepted")
    call(home, "DELETE", f"{CRDS}/widgets.{group}")
    wait_for(lambda: call(home, "GET", f"/apis/{group}/v1")[0] == 404, 60, "still served")
    wait_for(lambda: call(home, "GET", f"{CRDS}/widgets.{group}")[0] == 404, 60, "CRD stays")
    call(home, "POST", CRDS, definition(group))
    wait_for(lambda: established(home, f"widgets.{group}"), 60, "CRD not re-established")
    wait_for(lambda: call(home, "GET", widgets(group, namespace))[0] == 200, 60, "not served")
    assert call(home, "GET", widgets(group, namespace))[1]["items"] == []
    call(home, "DELETE", f"{CRDS}/widgets.{group}")
