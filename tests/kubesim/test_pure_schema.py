"""kubesim.schema: CRD schemas checked, validated, pruned and defaulted as apiextensions does."""

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.schema import (
    FieldError,
    apply_defaults,
    prune,
    structural_errors,
    validate,
)

# A kubebuilder-style schema: the kind of schema real servers accept.
SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A Widget.",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["mode"],
            "properties": {
                "mode": {"type": "string", "enum": ["A", "B"]},
                "replicas": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 5},
                "ratio": {"type": "number", "exclusiveMinimum": True, "minimum": 0},
                "name": {"type": "string", "minLength": 2, "maxLength": 4, "pattern": "^[a-z]+$"},
                "since": {"type": "string", "format": "date-time"},
                "enabled": {"type": "boolean", "default": True},
                "nickname": {"type": "string", "nullable": True},
                "port": {
                    "x-kubernetes-int-or-string": True,
                    "anyOf": [{"type": "integer"}, {"type": "string"}],
                },
                "tags": {
                    "type": "array",
                    "items": {"type": "string"},
                    "minItems": 1,
                    "maxItems": 2,
                },
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "rules": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["host"],
                        "properties": {
                            "host": {"type": "string"},
                            "weight": {"type": "integer", "default": 1},
                        },
                    },
                },
                "template": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": True,
                    "x-kubernetes-preserve-unknown-fields": True,
                },
                "extra": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "properties": {
                        "known": {"type": "object", "properties": {"a": {"type": "string"}}}
                    },
                },
                "policy": {
                    "type": "object",
                    "default": {"level": "low"},
                    "properties": {
                        "level": {"type": "string"},
                        "burst": {"type": "integer", "default": 3},
                    },
                },
            },
        },
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
    },
}


def widget(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": {"mode": "A", **spec},
    }


# --- validate --------------------------------------------------------------------------------


def test_a_valid_object_has_no_errors() -> None:
    obj = widget(
        replicas=3,
        ratio=0.5,
        name="abc",
        since="2024-01-02T03:04:05Z",
        nickname=None,
        port="http",
        tags=["a"],
        labels={"x": "y"},
        rules=[{"host": "h"}],
        template={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}},
        extra={"anything": [1, {"b": 2}]},
    )
    assert validate(obj, SCHEMA) == []


@pytest.mark.parametrize(
    "spec, message",
    [
        (
            {"replicas": "3"},
            'spec.replicas: Invalid value: "string": spec.replicas in body must be of type '
            'integer: "string"',
        ),
        (
            {"replicas": 2.5},
            'spec.replicas: Invalid value: "number": spec.replicas in body must be of type '
            'integer: "number"',
        ),
        (
            {"enabled": "yes"},
            'spec.enabled: Invalid value: "string": spec.enabled in body must be of type '
            'boolean: "string"',
        ),
        (
            {"labels": []},
            'spec.labels: Invalid value: "array": spec.labels in body must be of type '
            'object: "array"',
        ),
        (
            {"tags": "a"},
            'spec.tags: Invalid value: "string": spec.tags in body must be of type array: "string"',
        ),
        (
            {"name": None},
            'spec.name: Invalid value: "null": spec.name in body must be of type string: "null"',
        ),
        ({"mode": "C"}, 'spec.mode: Unsupported value: "C": supported values: "A", "B"'),
        (
            {"replicas": 0},
            "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or "
            "equal to 1",
        ),
        (
            {"replicas": 6},
            "spec.replicas: Invalid value: 6: spec.replicas in body should be less than or "
            "equal to 5",
        ),
        (
            {"ratio": 0},
            "spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0",
        ),
        (
            {"name": "a"},
            'spec.name: Invalid value: "a": spec.name in body should be at least 2 chars long',
        ),
        ({"name": "abcde"}, "spec.name: Too long: may not be more than 4 bytes"),
        (
            {"name": "AB"},
            "spec.name: Invalid value: \"AB\": spec.name in body should match '^[a-z]+$'",
        ),
        (
            {"since": "yesterday"},
            'spec.since: Invalid value: "yesterday": spec.since in body must be of type '
            'date-time: "yesterday"',
        ),
        (
            {"port": True},
            'spec.port: Invalid value: "boolean": spec.port in body must be of type '
            'integer,string: "boolean"',
        ),
        (
            {"tags": []},
            "spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items",
        ),
        ({"tags": ["a", "b", "c"]}, "spec.tags: Too many: 3: must have at most 2 items"),
        (
            {"tags": [1]},
            'spec.tags[0]: Invalid value: "integer": spec.tags[0] in body must be of type '
            'string: "integer"',
        ),
        (
            {"labels": {"x": 1}},
            'spec.labels.x: Invalid value: "integer": spec.labels.x in body must be of type '
            'string: "integer"',
        ),
        ({"rules": [{"host": "a"}, {}]}, "spec.rules[1].host: Required value"),
        (
            {"template": {"kind": "Pod"}},
            "spec.template.apiVersion: Required value: must not be empty",
        ),
        (
            {"template": {"apiVersion": "v1", "kind": "Bad_Kind"}},
            'spec.template.kind: Invalid value: "Bad_Kind": may have mixed case, but should '
            "otherwise match: a DNS-1035 label must consist of lower case alphanumeric "
            "characters or '-', start with an alphabetic character, and end with an "
            "alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation "
            "is '[a-z]([-a-z0-9]*[a-z0-9])?')",
        ),
    ],
)
def test_invalid_values_give_the_real_servers_messages(spec: dict[str, Any], message: str) -> None:
    assert [str(error) for error in validate(widget(**spec), SCHEMA)] == [message]


def test_missing_required_fields_are_reported_by_path() -> None:
    obj = widget()
    del obj["spec"]["mode"]
    errors = validate(obj, SCHEMA)
    assert errors == [FieldError("spec.mode", "Required value")]
    assert str(errors[0]) == "spec.mode: Required value"
    assert errors[0].reason == "FieldValueRequired"


def test_type_errors_carry_the_type_invalid_reason() -> None:
    (error,) = validate(widget(replicas="x"), SCHEMA)
    assert (error.path, error.type, error.value, error.reason) == (
        "spec.replicas",
        "Invalid value",
        "string",
        "FieldValueTypeInvalid",
    )


def test_integers_are_numbers_and_integral_floats_are_integers() -> None:
    assert validate(widget(ratio=2, replicas=2.0), SCHEMA) == []


def test_booleans_are_not_integers() -> None:
    assert [e.value for e in validate(widget(replicas=True), SCHEMA)] == ["boolean"]


def test_several_errors_are_all_reported() -> None:
    errors = validate(widget(mode="Z", replicas=9, name="x"), SCHEMA)
    assert {e.path for e in errors} == {"spec.mode", "spec.replicas", "spec.name"}


def test_unknown_fields_are_not_validation_errors() -> None:
    assert validate(widget(unknown={"x": 1}), SCHEMA) == []


@pytest.mark.parametrize(
    "junction, value, message",
    [
        (
            {"oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
            {"a": 1, "b": 2},
            'spec.x: Invalid value: "": "spec.x" must validate one and only one schema (oneOf)',
        ),
        (
            {"anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
            {},
            'spec.x: Invalid value: "": "spec.x" must validate at least one schema (anyOf)',
        ),
        (
            {"not": {"required": ["a"]}},
            {"a": 1},
            'spec.x: Invalid value: "": "spec.x" must not validate the schema (not)',
        ),
    ],
)
def test_junctions(junction: dict[str, Any], value: Any, message: str) -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "x": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                        **junction,
                    }
                },
            }
        },
    }
    assert [str(e) for e in validate({"spec": {"x": value}}, schema)] == [message]
    assert validate({"spec": {"x": {"a": 1} if "not" not in junction else {"c": 1}}}, schema) == []


# --- apply_defaults --------------------------------------------------------------------------


def test_defaults_fill_absent_fields_recursively() -> None:
    result = apply_defaults(widget(), SCHEMA)
    assert result["spec"]["enabled"] is True
    # The defaulted object gets the defaults of its own properties too.
    assert result["spec"]["policy"] == {"level": "low", "burst": 3}


def test_defaults_do_not_override_given_values() -> None:
    result = apply_defaults(widget(enabled=False, policy={"level": "high"}), SCHEMA)
    assert result["spec"]["enabled"] is False
    assert result["spec"]["policy"] == {"level": "high", "burst": 3}


def test_defaults_apply_inside_array_items() -> None:
    result = apply_defaults(widget(rules=[{"host": "a"}, {"host": "b", "weight": 5}]), SCHEMA)
    assert result["spec"]["rules"] == [{"host": "a", "weight": 1}, {"host": "b", "weight": 5}]


def test_a_null_for_a_non_nullable_field_with_a_default_gets_the_default() -> None:
    assert apply_defaults(widget(enabled=None), SCHEMA)["spec"]["enabled"] is True


def test_a_null_for_a_nullable_field_stays_null() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "nullable": True, "default": "x"}},
    }
    assert apply_defaults({"a": None}, schema) == {"a": None}
    assert apply_defaults({}, schema) == {"a": "x"}


def test_absent_parents_are_not_created_for_nested_defaults() -> None:
    obj = widget()
    del obj["spec"]
    assert "spec" not in apply_defaults(obj, SCHEMA)


def test_defaults_in_additional_properties_replace_nulls() -> None:
    schema = {
        "type": "object",
        "properties": {
            "m": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "default": {"d": 1},
                    "properties": {"d": {"type": "integer"}},
                },
            }
        },
    }
    assert apply_defaults({"m": {"a": None, "b": {"d": 2}}}, schema) == {
        "m": {"a": {"d": 1}, "b": {"d": 2}}
    }


def test_apply_defaults_does_not_modify_its_input() -> None:
    obj = widget()
    apply_defaults(obj, SCHEMA)
    assert obj == widget()


# --- prune -----------------------------------------------------------------------------------


def test_unknown_fields_are_pruned_recursively() -> None:
    obj = widget(unknown=1, rules=[{"host": "h", "junk": True}], policy={"level": "a", "x": 1})
    obj["junk"] = {"a": 1}
    obj["status"] = {"phase": "Ready", "junk": 1}
    result = prune(obj, SCHEMA)
    assert "junk" not in result and "unknown" not in result["spec"]
    assert result["spec"]["rules"] == [{"host": "h"}]
    assert result["spec"]["policy"] == {"level": "a"}
    assert result["status"] == {"phase": "Ready"}


def test_resource_fields_are_kept_at_the_root() -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object"}}}
    obj = {
        "apiVersion": "a/v1",
        "kind": "K",
        "metadata": {"name": "x", "labels": {"a": "b"}},
        "spec": {"x": 1},
        "other": 2,
    }
    assert prune(obj, schema) == {
        "apiVersion": "a/v1",
        "kind": "K",
        "metadata": {"name": "x", "labels": {"a": "b"}},
        "spec": {},
    }


def test_preserve_unknown_fields_keeps_unknown_but_prunes_known_fields() -> None:
    obj = widget(extra={"free": {"deep": 1}, "known": {"a": "x", "b": "pruned"}})
    assert prune(obj, SCHEMA)["spec"]["extra"] == {"free": {"deep": 1}, "known": {"a": "x"}}


def test_embedded_resources_keep_api_version_kind_and_object_meta() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "template": {
                        "type": "object",
                        "x-kubernetes-embedded-resource": True,
                        "properties": {"spec": {"type": "object"}},
                    }
                },
            }
        },
    }
    template = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "bogus": 1},
        "spec": {"x": 1},
        "extra": 1,
    }
    assert prune({"spec": {"template": template}}, schema)["spec"]["template"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {},
    }


def test_additional_properties_values_are_pruned_by_their_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "m": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "properties": {"keep": {"type": "string"}},
                },
            }
        },
    }
    assert prune({"m": {"a": {"keep": "x", "drop": 1}}}, schema) == {"m": {"a": {"keep": "x"}}}


def test_prune_does_not_modify_its_input() -> None:
    obj = widget(unknown=1)
    prune(obj, SCHEMA)
    assert obj == widget(unknown=1)


# --- structural_errors -----------------------------------------------------------------------


def test_a_structural_schema_has_no_errors() -> None:
    assert structural_errors(SCHEMA) == []


def test_int_or_string_patterns_are_structural() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"x-kubernetes-int-or-string": True},
            "b": {
                "x-kubernetes-int-or-string": True,
                "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"pattern": "^a"}],
            },
            "c": {"x-kubernetes-preserve-unknown-fields": True},
        },
    }
    assert structural_errors(schema) == []


def with_spec(spec: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"spec": spec}}


@pytest.mark.parametrize(
    "schema, errors",
    [
        (
            with_spec({"properties": {"a": {"type": "string"}}}),
            [
                "properties[spec].type: Required value: must not be empty for specified object "
                "fields"
            ],
        ),
        (
            with_spec({"type": "array", "items": {}}),
            [
                "properties[spec].items.type: Required value: must not be empty for specified "
                "array items"
            ],
        ),
        (
            with_spec({"type": "array"}),
            ["properties[spec].items: Required value: must be specified"],
        ),
        (
            {"properties": {}},
            ["type: Required value: must not be empty at the root"],
        ),
        (
            {"type": "string"},
            ['type: Invalid value: "string": must be object at the root'],
        ),
        (
            with_spec({"$ref": "#/definitions/x"}),
            [
                "properties[spec].$ref: Forbidden: $ref is not supported",
                "properties[spec].type: Required value: must not be empty for specified object "
                "fields",
            ],
        ),
        (
            with_spec(
                {
                    "type": "object",
                    "properties": {"a": {"type": "string"}},
                    "additionalProperties": {"type": "string"},
                }
            ),
            [
                "properties[spec].additionalProperties: Forbidden: additionalProperties and "
                "properties are mutual exclusive"
            ],
        ),
        (
            with_spec(
                {
                    "type": "object",
                    "properties": {"a": {"type": "string"}},
                    "additionalProperties": False,
                }
            ),
            [
                "properties[spec].additionalProperties: Forbidden: additionalProperties and "
                "properties are mutual exclusive"
            ],
        ),
        (
            {"type": "object", "additionalProperties": {"type": "string"}},
            ["additionalProperties: Forbidden: must not be used at the root"],
        ),
        (
            {
                "type": "object",
                "properties": {
                    "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}
                },
            },
            [
                "properties[metadata]: Forbidden: must not specify anything other than name and "
                "generateName, but metadata is implicitly specified"
            ],
        ),
        (
            {"type": "object", "properties": {"kind": {"type": "integer"}}},
            ['properties[kind].type: Invalid value: "integer": must be string'],
        ),
        (
            with_spec({"type": "foo"}),
            [
                'properties[spec].type: Unsupported value: "foo": supported values: "array", '
                '"boolean", "integer", "number", "object", "string"'
            ],
        ),
        (
            with_spec({"type": "string", "x-kubernetes-preserve-unknown-fields": False}),
            [
                "properties[spec].x-kubernetes-preserve-unknown-fields: Invalid value: false: "
                "must be true or undefined"
            ],
        ),
        (
            with_spec({"type": "object", "x-kubernetes-embedded-resource": True}),
            [
                "properties[spec].properties: Required value: must not be empty if "
                "x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-"
                "fields"
            ],
        ),
        (
            with_spec(
                {
                    "type": "string",
                    "x-kubernetes-embedded-resource": True,
                    "x-kubernetes-preserve-unknown-fields": True,
                }
            ),
            [
                'properties[spec].type: Invalid value: "string": must be object if '
                "x-kubernetes-embedded-resource is true"
            ],
        ),
        (
            with_spec({"type": "object", "anyOf": [{"type": "object"}]}),
            ["properties[spec].anyOf[0].type: Forbidden: must be empty to be structural"],
        ),
        (
            {
                "type": "object",
                "properties": {"spec": {"type": "object"}},
                "oneOf": [{"properties": {"spec": {"properties": {"a": {"minLength": 1}}}}}],
            },
            [
                "properties[spec].properties[a]: Required value: because it is defined in "
                "oneOf[0].properties[spec].properties[a]"
            ],
        ),
        # Only the root's value validations are checked for completeness (as the real server).
        (with_spec({"type": "object", "oneOf": [{"properties": {"a": {"minLength": 1}}}]}), []),
        (
            with_spec({"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
            [
                "properties[spec].uniqueItems: Forbidden: uniqueItems cannot be set to true since "
                "the runtime complexity becomes quadratic"
            ],
        ),
        (
            with_spec({"type": "string", "pattern": "("}),
            [
                'properties[spec].pattern: Invalid value: "(": must be a valid regular '
                "expression, but isn't: error parsing regexp: missing closing ): `(`"
            ],
        ),
    ],
)
def test_non_structural_schemas_are_reported_like_the_real_server(
    schema: dict[str, Any], errors: list[str]
) -> None:
    assert structural_errors(schema) == errors


@pytest.mark.parametrize(
    "pattern, problem",
    [
        ("^a(?=b)", "error parsing regexp: invalid or unsupported Perl syntax: `(?=`"),
        ("(?<!x)y", "error parsing regexp: invalid or unsupported Perl syntax: `(?<!`"),
        ("(a)\\1", "error parsing regexp: invalid escape sequence: `\\1`"),
    ],
)
def test_patterns_go_cannot_compile_are_refused(pattern: str, problem: str) -> None:
    # Python's re accepts these; RE2 (Go's regexp) does not.
    assert structural_errors(with_spec({"type": "string", "pattern": pattern})) == [
        f"properties[spec].pattern: Invalid value: {json.dumps(pattern)}: must be a valid "
        f"regular expression, but isn't: {problem}"
    ]


def test_structural_errors_can_carry_the_crd_path() -> None:
    path = "spec.versions[0].schema.openAPIV3Schema"
    assert structural_errors(with_spec({"properties": {}}), path) == [
        f"{path}.properties[spec].type: Required value: must not be empty for specified object "
        "fields"
    ]


def test_structural_errors_are_sorted() -> None:
    schema = {"type": "object", "properties": {"z": {}, "a": {}}}
    errors = structural_errors(schema)
    assert errors == sorted(errors) and len(errors) == 2


# --- properties ------------------------------------------------------------------------------

_scalars = st.one_of(st.booleans(), st.integers(-3, 3), st.text("ab", max_size=2), st.none())
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=2),
        st.dictionaries(st.text("abxy", min_size=1, max_size=2), inner, max_size=3),
    ),
    max_leaves=8,
)


@given(st.dictionaries(st.sampled_from(["spec", "status", "junk"]), _values, max_size=3))
def test_prune_and_defaults_are_idempotent(obj: dict[str, Any]) -> None:
    once = prune(apply_defaults(obj, SCHEMA), SCHEMA)
    assert prune(apply_defaults(copy.deepcopy(once), SCHEMA), SCHEMA) == once


@given(st.dictionaries(st.text("abxy", min_size=1, max_size=2), _values, max_size=4))
def test_preserve_unknown_fields_at_the_root_keeps_everything(obj: dict[str, Any]) -> None:
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    assert prune(obj, schema) == obj


@pytest.mark.parametrize(
    "constraint, value, message",
    [
        ({"type": "string", "maxLength": 1}, "ab", "spec.v: Too long: may not be more than 1 byte"),
        (
            {"type": "array", "items": {"type": "string"}, "maxItems": 1},
            ["a", "b"],
            "spec.v: Too many: 2: must have at most 1 item",
        ),
        (
            {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "string"}},
            {"a": "x", "b": "y"},
            "spec.v: Too many: 2: must have at most 1 item",
        ),
        (
            {"type": "object", "minProperties": 2, "additionalProperties": {"type": "string"}},
            {"a": "x"},
            "spec.v: Invalid value: 1: spec.v in body should have at least 2 properties",
        ),
        (
            {"type": "number", "multipleOf": 0.5},
            0.7,
            "spec.v: Invalid value: 0.7: spec.v in body should be a multiple of 0.5",
        ),
        (
            {"type": "integer", "maximum": 3, "exclusiveMaximum": True},
            3,
            "spec.v: Invalid value: 3: spec.v in body should be less than 3",
        ),
        (
            {"type": "integer", "enum": [1, 2]},
            3,
            'spec.v: Unsupported value: 3: supported values: "1", "2"',
        ),
        (
            {"type": "string", "format": "uuid"},
            "nope",
            'spec.v: Invalid value: "nope": spec.v in body must be of type uuid: "nope"',
        ),
        (
            {"type": "string", "format": "date"},
            "2024-13",
            'spec.v: Invalid value: "2024-13": spec.v in body must be of type date: "2024-13"',
        ),
        (
            {"type": "string", "format": "date-time"},
            "2024-02-30T00:00:00Z",
            'spec.v: Invalid value: "2024-02-30T00:00:00Z": spec.v in body must be of type '
            'date-time: "2024-02-30T00:00:00Z"',
        ),
    ],
)
def test_more_constraints(constraint: dict[str, Any], value: Any, message: str) -> None:
    schema = with_spec({"type": "object", "properties": {"v": constraint}})
    assert [str(e) for e in validate({"spec": {"v": value}}, schema)] == [message]


@pytest.mark.parametrize(
    "format_name, value",
    [
        ("date-time", "2024-01-02T03:04:05.123+02:00"),
        ("date", "2024-01-02"),
        ("uuid", "6ba7b810-9dad-11d1-80b4-00c04fd430c8"),
        ("byte", "aGVsbG8="),
        ("ipv4", "10.0.0.1"),
        ("ipv6", "fd00::1"),
        ("cidr", "10.0.0.0/8"),
        ("int32", "x"),
        ("some-unknown-format", "anything"),
    ],
)
def test_valid_formats_pass(format_name: str, value: str) -> None:
    schema = with_spec(
        {"type": "object", "properties": {"v": {"type": "string", "format": format_name}}}
    )
    assert validate({"spec": {"v": value}}, schema) == []


def test_no_defaults_in_top_level_resource_fields_nor_embedded_resources_in_metadata() -> None:
    schema = {
        "type": "object",
        "properties": {
            "kind": {"type": "string", "default": "X"},
            "metadata": {
                "type": "object",
                "properties": {
                    "name": {
                        "type": "object",
                        "x-kubernetes-embedded-resource": True,
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            },
        },
    }
    path = "spec.versions[0].schema.openAPIV3Schema"
    errors = structural_errors(schema, path)
    assert (
        f"{path}.properties[kind].default: Forbidden: must not be set in top-level kind" in errors
    )
    nested = {
        "type": "object",
        "properties": {
            "metadata": {
                "type": "object",
                "properties": {"name": {"type": "string", "default": "x"}},
            }
        },
    }
    assert (
        "properties[metadata].properties[name].default: Forbidden: must not be set in top-level "
        "metadata"
    ) in structural_errors(nested)
    assert (
        f"{path}.properties[metadata].properties[name].x-kubernetes-embedded-resource: "
        "Forbidden: must not be used inside of resource meta"
    ) in errors


@pytest.mark.parametrize("port", [80, "http", "80%"])
def test_int_or_string_accepts_integers_and_strings(port: Any) -> None:
    assert validate(widget(port=port), SCHEMA) == []


def test_a_required_field_present_as_null_is_a_type_error_not_a_missing_one() -> None:
    obj = widget()
    obj["spec"]["mode"] = None
    assert [str(e) for e in validate(obj, SCHEMA)] == [
        'spec.mode: Invalid value: "null": spec.mode in body must be of type string: "null"'
    ]


def test_embedded_resources_in_array_items_are_checked() -> None:
    schema = with_spec(
        {
            "type": "object",
            "properties": {
                "objects": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "x-kubernetes-embedded-resource": True,
                        "x-kubernetes-preserve-unknown-fields": True,
                    },
                }
            },
        }
    )
    obj = {"spec": {"objects": [{"apiVersion": "v1", "kind": "ConfigMap"}, {"apiVersion": "v1"}]}}
    assert [str(e) for e in validate(obj, schema)] == [
        "spec.objects[1].kind: Required value: must not be empty"
    ]


def test_null_array_items_get_the_items_default() -> None:
    schema = with_spec(
        {
            "type": "object",
            "properties": {"l": {"type": "array", "items": {"type": "string", "default": "d"}}},
        }
    )
    assert apply_defaults({"spec": {"l": ["a", None]}}, schema) == {"spec": {"l": ["a", "d"]}}


def test_pruning_inside_arrays_of_arrays() -> None:
    schema = with_spec(
        {
            "type": "object",
            "properties": {
                "m": {
                    "type": "array",
                    "items": {
                        "type": "array",
                        "items": {"type": "object", "properties": {"k": {"type": "string"}}},
                    },
                }
            },
        }
    )
    obj = {"spec": {"m": [[{"k": "a", "x": 1}], []]}}
    assert prune(obj, schema) == {"spec": {"m": [[{"k": "a"}], []]}}


def test_objects_without_a_schema_for_their_fields_are_emptied_by_pruning() -> None:
    schema = with_spec({"type": "object", "properties": {"o": {"type": "object"}}})
    assert prune({"spec": {"o": {"a": 1}}}, schema) == {"spec": {"o": {}}}
