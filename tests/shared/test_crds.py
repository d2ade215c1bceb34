"""The CRDs in crds/: generated from the models, structural, and what kubectl users expect."""

from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import kubernetes_validate
import pytest
import yaml
from hypothesis import given, settings
from pydantic import BaseModel, Field

from shared.api.base import ApiModel
from shared.api.registry import MODELS_BY_KIND, RESOURCE_MODELS
from shared.api.resource import CustomResource
from shared.crdgen import crd_for, rendered_crds, structural_schema
from tests.shared.api_strategies import resources

CRD_DIR = Path(__file__).resolve().parents[2] / "crds"
REGENERATE = "run `python scripts/generate_crds.py` and commit crds/"


def committed_crds() -> dict[str, dict[str, Any]]:
    return {path.name: yaml.safe_load(path.read_text()) for path in sorted(CRD_DIR.glob("*.yaml"))}


def test_the_committed_crds_are_exactly_what_the_models_generate() -> None:
    expected = rendered_crds(RESOURCE_MODELS)
    committed = {path.name: path.read_text() for path in CRD_DIR.glob("*.yaml")}
    assert sorted(committed) == sorted(expected), f"crds/ has the wrong files: {REGENERATE}"
    for name, text in expected.items():
        assert committed[name] == text, f"crds/{name} is stale: {REGENERATE}"


def apiextensions_problems(crd: dict[str, Any]) -> list[str]:
    """What the official Kubernetes 1.30 CustomResourceDefinition schema refuses in `crd`,
    unknown keys included (strict)."""
    try:
        checked_against = kubernetes_validate.validate(crd, "1.30", strict=True)
    except kubernetes_validate.ValidationError as error:
        return [str(error)]
    assert checked_against == "1.30"  # not an older schema standing in for it
    return []


@pytest.mark.parametrize("name", sorted(p.name for p in CRD_DIR.glob("*.yaml")))
def test_every_crd_is_a_valid_apiextensions_v1_object(name: str) -> None:
    assert apiextensions_problems(committed_crds()[name]) == []


def test_the_apiextensions_check_refuses_unknown_keys_and_wrong_types() -> None:
    crd = committed_crds()["offloading.liqo.io_shadowpods.yaml"]
    assert apiextensions_problems({**crd, "spec": {**crd["spec"], "unknownKey": 1}}) != []
    assert apiextensions_problems({**crd, "spec": {**crd["spec"], "scope": 7}}) != []


def test_one_crd_per_kind_named_after_group_and_plural() -> None:
    crds = committed_crds()
    for model in RESOURCE_MODELS:
        definition = model.definition
        crd = crds[f"{definition.group}_{definition.plural}.yaml"]
        assert crd["metadata"]["name"] == f"{definition.plural}.{definition.group}"
        names = crd["spec"]["names"]
        assert (names["kind"], names["plural"], names["singular"]) == (
            definition.kind,
            definition.plural,
            definition.singular,
        )
        assert names.get("shortNames", []) == list(definition.short_names)
        assert names["categories"] == ["liqo"]
        assert crd["spec"]["scope"] == definition.scope.value
        (version,) = crd["spec"]["versions"]
        assert version["name"] == definition.version
        assert version["served"] and version["storage"]
        assert version["subresources"] == {"status": {}}


def test_kubectl_get_foreignclusters_shows_id_address_source_offer_phase_and_age() -> None:
    crd = committed_crds()["discovery.liqo.io_foreignclusters.yaml"]
    assert crd["spec"]["scope"] == "Cluster"
    (version,) = crd["spec"]["versions"]
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns == {"Cluster": ".spec.clusterId", "API": ".spec.apiServerUrl",
                       "Source": ".status.discovery.source", "Offer": ".status.offer.summary",
                       "Phase": ".status.phase", "Age": ".metadata.creationTimestamp"}


def test_kubectl_get_shadowpods_shows_phase_remote_node_and_age() -> None:
    crd = committed_crds()["offloading.liqo.io_shadowpods.yaml"]
    assert crd["spec"]["names"]["shortNames"] == ["shp"]
    (version,) = crd["spec"]["versions"]
    assert version["additionalPrinterColumns"] == [
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Node", "type": "string", "jsonPath": ".status.nodeName"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]


def test_the_embedded_pod_spec_and_pod_status_are_accepted_in_full() -> None:
    schema = openapi_schema("ShadowPod")
    pod = schema["properties"]["spec"]["properties"]["pod"]
    pod_status = schema["properties"]["status"]["properties"]["podStatus"]
    for embedded in (pod, pod_status):
        assert embedded["type"] == "object"
        assert embedded["x-kubernetes-preserve-unknown-fields"] is True
    assert schema["properties"]["spec"]["required"] == ["pod"]


def test_defaults_and_enums_of_the_models_are_in_the_schemas() -> None:
    spec = openapi_schema("NamespaceOffloading")["properties"]["spec"]["properties"]
    assert spec["podOffloadingStrategy"]["default"] == "LocalAndRemote"
    assert spec["podOffloadingStrategy"]["enum"] == ["Local", "Remote", "LocalAndRemote"]
    assert spec["namespaceMappingStrategy"]["default"] == "DefaultName"
    assert spec["clusterSelector"]["default"] == {}
    quota = openapi_schema("Quota")["properties"]["spec"]
    assert quota["required"] == ["consumerClusterId"]
    assert quota["properties"]["cordoned"]["default"] is False
    assert quota["properties"]["limitsEnforcement"]["enum"] == ["None", "Soft", "Hard"]
    recreations = openapi_schema("ShadowPod")["properties"]["status"]["properties"]["recreations"]
    assert recreations == {**recreations, "type": "integer", "default": 0, "minimum": 0}


def test_quantities_are_int_or_string_like_core_resource_lists() -> None:
    resources = openapi_schema("Quota")["properties"]["spec"]["properties"]["resources"]
    quantity = resources["additionalProperties"]
    assert quantity["x-kubernetes-int-or-string"] is True
    assert quantity["anyOf"] == [{"type": "integer"}, {"type": "string"}]


def test_the_root_leaves_metadata_to_the_apiserver() -> None:
    for model in RESOURCE_MODELS:
        properties = openapi_schema(model.definition.kind)["properties"]
        assert properties["metadata"] == {"type": "object"}
        assert properties["apiVersion"] == properties["kind"] == {"type": "string"}


# --- structural schemas -----------------------------------------------------------------------


def subschemas(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node with the path kubectl explain would show."""
    yield path or ".", schema
    for name, sub in schema.get("properties", {}).items():
        yield from subschemas(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from subschemas(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from subschemas(schema["additionalProperties"], f"{path}{{}}")


def structural_problems(schema: dict[str, Any]) -> list[str]:
    problems = []
    for path, node in subschemas(schema):
        if "$ref" in node or "$defs" in node:
            problems.append(f"{path}: $ref/$defs")
        if node.get("additionalProperties") is False:
            problems.append(f"{path}: additionalProperties false")
        if "additionalProperties" in node and "properties" in node:
            problems.append(f"{path}: both properties and additionalProperties")
        typed = (
            "type" in node
            or node.get("x-kubernetes-preserve-unknown-fields") is True
            or node.get("x-kubernetes-int-or-string") is True
        )
        if not typed:
            problems.append(f"{path}: no type")
        if node.get("type") == "null" or "title" in node or "const" in node:
            problems.append(f"{path}: JSON-Schema-only keys {sorted(node)}")
    return problems


@pytest.mark.parametrize("kind", sorted(MODELS_BY_KIND))
def test_every_schema_is_structural(kind: str) -> None:
    assert structural_problems(openapi_schema(kind)) == []


def test_the_structural_check_catches_what_it_should() -> None:
    bad = {
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/A"},
            "b": {"type": "object", "additionalProperties": False, "properties": {}},
            "c": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
    }
    assert structural_problems(bad) == [
        ".a: $ref/$defs",
        ".a: no type",
        ".b: additionalProperties false",
        ".b: both properties and additionalProperties",
        ".c: no type",
    ]


class _Colour(StrEnum):
    RED = "Red"
    BLUE = "Blue"


class _Inner(ApiModel):
    colour: _Colour = _Colour.RED


class _Sample(ApiModel):
    mode: Literal["fixed"] = "fixed"
    inner: _Inner | None = None
    required_inner: _Inner
    free_form: dict[str, Any] = Field(default={})
    counts: dict[str, int] = Field(default={})
    positive: int = Field(default=1, gt=0)


def test_structural_schema_inlines_references_and_turns_null_branches_into_nullable() -> None:
    schema = structural_schema(_Sample.model_json_schema(by_alias=True))
    inner = {
        "type": "object",
        "properties": {"colour": {"type": "string", "enum": ["Red", "Blue"], "default": "Red"}},
    }
    assert schema["properties"]["inner"] == {**inner, "nullable": True}
    assert schema["properties"]["requiredInner"] == inner
    assert schema["required"] == ["requiredInner"]
    assert "additionalProperties" not in schema


def test_structural_schema_keeps_free_form_dicts_whole_and_typed_maps_typed() -> None:
    properties = structural_schema(_Sample.model_json_schema(by_alias=True))["properties"]
    assert properties["freeForm"] == {
        "type": "object",
        "default": {},
        "x-kubernetes-preserve-unknown-fields": True,
    }
    assert properties["counts"]["additionalProperties"] == {"type": "integer"}


def test_structural_schema_writes_a_literal_as_a_one_value_enum() -> None:
    mode = structural_schema(_Sample.model_json_schema(by_alias=True))["properties"]["mode"]
    assert mode == {"type": "string", "enum": ["fixed"], "default": "fixed"}


def test_structural_schema_writes_exclusive_bounds_the_openapi_v3_way() -> None:
    positive = structural_schema(_Sample.model_json_schema(by_alias=True))["properties"]["positive"]
    assert positive == {"type": "integer", "default": 1, "minimum": 0, "exclusiveMinimum": True}


def test_crdgen_is_pure_and_repeatable() -> None:
    assert crd_for(MODELS_BY_KIND["VirtualNode"]) == crd_for(MODELS_BY_KIND["VirtualNode"])


# --- against kubesim's own implementation of the apiserver's schema rules ----------------------


SAMPLES: list[BaseModel] = [
    MODELS_BY_KIND["ShadowPod"].model_validate(
        {
            "metadata": {"name": "web", "namespace": "shop-home"},
            "spec": {"pod": {"containers": [{"name": "web", "image": "nginx"}]}},
            "status": {"phase": "Running", "nodeName": "w1", "podStatus": {"podIP": "10.0.0.1"}},
        }
    ),
    MODELS_BY_KIND["NamespaceOffloading"].model_validate(
        {
            "metadata": {"name": "offloading", "namespace": "shop"},
            "spec": {
                "clusterSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "region", "operator": "In", "values": ["eu"]}
                            ]
                        }
                    ]
                }
            },
        }
    ),
    MODELS_BY_KIND["Quota"].model_validate(
        {"metadata": {"name": "q"}, "spec": {"consumerClusterId": "h", "resources": {"cpu": 2}}}
    ),
    MODELS_BY_KIND["VirtualNode"].model_validate(
        {
            "metadata": {"name": "remote"},
            "spec": {"clusterId": "remote", "taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "lastTransitionTime": "2024-01-01T00:00:00Z",
                    }
                ]
            },
        }
    ),
]


@pytest.mark.parametrize("kind", sorted(MODELS_BY_KIND))
def test_kubesim_finds_every_generated_schema_structural(kind: str) -> None:
    schema_rules = pytest.importorskip("kubesim.schema")
    assert list(schema_rules.structural_errors(openapi_schema(kind))) == []


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: type(s).__name__)
def test_kubesim_accepts_what_the_models_write(sample: BaseModel) -> None:
    schema_rules = pytest.importorskip("kubesim.schema")
    wire = sample.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert list(schema_rules.validate(wire, openapi_schema(wire["kind"]))) == []


def test_kubesim_refuses_what_the_models_refuse() -> None:
    schema_rules = pytest.importorskip("kubesim.schema")
    quota = {
        "apiVersion": "offloading.liqo.io/v1beta1",
        "kind": "Quota",
        "metadata": {"name": "q"},
        "spec": {
            "consumerClusterId": "h",
            "limitsEnforcement": "Strict",
            "resources": {"cpu": "x"},
        },
    }
    fields = {error.path for error in schema_rules.validate(quota, openapi_schema("Quota"))}
    assert fields == {"spec.limitsEnforcement", "spec.resources.cpu"}


@pytest.mark.parametrize("model", RESOURCE_MODELS, ids=lambda m: m.definition.kind)
def test_the_apiserver_stores_exactly_what_the_models_write(model: type[CustomResource]) -> None:
    """Any object a model writes is valid for its CRD, and the apiserver's defaulting adds nothing
    to it (so comparing what we would write with what is stored never shows a false change)."""
    schema_rules = pytest.importorskip("kubesim.schema")
    schema = openapi_schema(model.definition.kind)

    @settings(max_examples=100, deadline=None)
    @given(resources(model))
    def stored_as_written(resource: CustomResource) -> None:
        wire = resource.to_wire()
        assert schema_rules.validate(wire, schema) == []
        known = schema_rules.prune(wire, schema)  # unknown fields are the server's to drop
        assert schema_rules.apply_defaults(known, schema) == known

    stored_as_written()


MINIMAL_SPECS: dict[str, dict[str, Any]] = {
    "ShadowPod": {"pod": {"containers": [{"name": "c", "image": "busybox"}]}},
    "NamespaceOffloading": {},
    "NamespaceMap": {},
    "ResourceOffer": {"clusterId": "remote", "consumerClusterId": "home"},
    "Quota": {"consumerClusterId": "home"},
    "VirtualNode": {"clusterId": "remote"},
}


@pytest.mark.parametrize("kind", sorted(MINIMAL_SPECS))
def test_a_stored_minimal_object_reads_back_unchanged(kind: str) -> None:
    """The CRD's defaults are the model's defaults: re-writing what a user created is no change."""
    schema_rules = pytest.importorskip("kubesim.schema")
    model = MODELS_BY_KIND[kind]
    created = {
        "apiVersion": model.definition.api_version,
        "kind": kind,
        "metadata": {"name": "x"},
        "spec": MINIMAL_SPECS[kind],
        "status": {},
    }
    stored = schema_rules.apply_defaults(created, openapi_schema(kind))
    assert model.model_validate(stored).to_wire() == stored


def openapi_schema(kind: str) -> dict[str, Any]:
    (version,) = crd_for(MODELS_BY_KIND[kind])["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema
