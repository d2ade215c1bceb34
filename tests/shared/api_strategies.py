"""Hypothesis strategies for any valid object of an API model, derived from the model's own
JSON schema (so new fields are covered without touching the tests)."""

import datetime
from typing import Any

from hypothesis import strategies as st

from shared.api.resource import CustomResource

Schema = dict[str, Any]

aware_datetimes = st.datetimes(
    min_value=datetime.datetime(1900, 1, 1),
    max_value=datetime.datetime(9000, 1, 1),
    timezones=st.builds(
        datetime.timezone,
        st.integers(min_value=-23 * 60, max_value=23 * 60).map(
            lambda minutes: datetime.timedelta(minutes=minutes)
        ),
    ),
)

# What a free-form Kubernetes structure (a PodSpec, a pod status) may hold once decoded.
json_like = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=10)
    | aware_datetimes,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=5,
)


def from_schema(schema: Schema, defs: dict[str, Schema]) -> st.SearchStrategy[Any]:
    """Values valid for the pydantic JSON schema `schema` (the subset the API models use)."""
    if "$ref" in schema:
        return from_schema(defs[schema["$ref"].removeprefix("#/$defs/")], defs)
    if schema.get("x-kubernetes-int-or-string"):
        return st.integers(min_value=0, max_value=10**6) | st.from_regex(
            schema["pattern"], fullmatch=True
        )
    if "anyOf" in schema:
        return st.one_of([from_schema(branch, defs) for branch in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return st.dictionaries(st.text(max_size=8), json_like, max_size=3)
    kind = schema.get("type")
    if kind == "string":
        if schema.get("format") == "date-time":
            return aware_datetimes
        return st.text(min_size=schema.get("minLength", 0), max_size=12)
    if kind == "integer":
        return st.integers(min_value=schema.get("minimum", -(2**63)), max_value=2**63 - 1)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return st.lists(from_schema(schema["items"], defs), min_size=schema.get("minItems", 0),
                        max_size=3)
    if kind == "object":
        return _objects(schema, defs)
    raise AssertionError(f"no strategy for schema {schema}")


def _objects(schema: Schema, defs: dict[str, Schema]) -> st.SearchStrategy[dict[str, Any]]:
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    if not properties:
        values = json_like if extra is True else from_schema(extra or {"type": "null"}, defs)
        return st.dictionaries(st.text(max_size=8), values, max_size=3)
    required = set(schema.get("required", ()))
    fields = st.fixed_dictionaries(
        {name: from_schema(sub, defs) for name, sub in properties.items() if name in required},
        optional={
            name: from_schema(sub, defs) for name, sub in properties.items() if name not in required
        },
    )
    if extra is not True:
        return fields
    # Unknown fields of a newer annex: a '-' keeps them clear of every field name and alias.
    unknown = st.dictionaries(
        st.text(max_size=6).map(lambda key: f"x-{key}"), json_like, max_size=1
    )
    return st.builds(lambda known, more: {**more, **known}, fields, unknown)


def resources(model: type[CustomResource]) -> st.SearchStrategy[CustomResource]:
    schema = model.model_json_schema(by_alias=True)
    raw = from_schema(schema, schema.get("$defs", {}))
    definition = model.definition
    fixed = {"apiVersion": definition.api_version, "kind": definition.kind}
    return raw.map(lambda obj: model.model_validate({**obj, **fixed}))
